"""Difficulty-subset files on IPFS: publish one, and fetch the one a task spec names.

A task spec with `subset` set can only be built once its subset file is known to the
process (`tasks.difficulty.register_subset`); `fetch_task_subset` does that right after a
participant fetches the run spec, so worker, validator and trainer build the same task.
"""

from __future__ import annotations

from typing import Any

from ledger_client.content import get_object, put_object
from ledger_client.kubo import KuboClient
from tasks.difficulty import DifficultySubset, register_subset


def publish_task_subset(kubo: KuboClient, subset: DifficultySubset) -> str:
    """Store the subset file as one raw object; returns its digest (0x-hex) for `TaskSpec.subset`."""
    return "0x" + put_object(kubo, subset.to_bytes()).hex()


def fetch_task_subset(kubo: KuboClient, task_spec: dict[str, Any], timeout: float = 30.0) -> None:
    """Fetch and register the subset the task spec names (nothing to do if it names none)."""
    digest = task_spec.get("subset")
    if digest:
        register_subset(get_object(kubo, bytes.fromhex(digest[2:]), timeout=timeout))
