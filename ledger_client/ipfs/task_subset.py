"""Difficulty-subset files on IPFS: publish one, and fetch the one a task spec names.

A task spec with `subset` set can only be built once its subset file is known to the
process (`tasks.difficulty.register_subset`); `fetch_task_subset` does that right after a
participant fetches the run spec, so worker, validator and trainer build the same task.
"""

from __future__ import annotations

from ledger_client.ipfs.content import get_object, put_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import Digest
from tasks.difficulty import DifficultySubset, register_subset
from tasks.registry import TaskSpec


def publish_task_subset(kubo: KuboClient, subset: DifficultySubset) -> str:
    """Store the subset file as one raw object; returns its digest (0x-hex) for `TaskSpec.subset`."""
    return str(Digest(put_object(kubo, subset.to_bytes())))


def fetch_task_subset(kubo: KuboClient, task_spec: TaskSpec, timeout: float = 30.0) -> None:
    """Fetch and register the subset the task spec names (nothing to do if it names none)."""
    if task_spec.subset:
        register_subset(get_object(kubo, Digest.parse(task_spec.subset), timeout=timeout))
