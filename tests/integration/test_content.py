"""On-chain objects (raw single-block convention) and run specs against a real Kubo."""

from __future__ import annotations

import hashlib

import pytest

from ledger_client.ipfs.content import (
    MAX_OBJECT_BYTES,
    ContentTooLarge,
    ContentUnavailable,
    fetch_run_spec,
    get_object,
    publish_run_spec,
    put_object,
)
from protocol.runspec import RunSpec


def test_digest_is_sha256_of_the_bytes_and_round_trips(kubo):
    data = b"rollout bytes " * 100
    digest = put_object(kubo, data)
    assert digest == hashlib.sha256(data).digest()
    assert get_object(kubo, digest) == data


def test_missing_object_is_unavailable_not_a_hang(kubo):
    with pytest.raises(ContentUnavailable):
        get_object(kubo, hashlib.sha256(b"never added").digest(), timeout=2)


def test_objects_larger_than_one_block_are_refused(kubo):
    with pytest.raises(ContentTooLarge):
        put_object(kubo, bytes(MAX_OBJECT_BYTES + 1))


def test_run_spec_round_trips_through_its_task_ref(kubo):
    spec = RunSpec(task={"name": "digits/add", "seed": 0}, pool_seed="0x" + "ab" * 32)
    ref = publish_run_spec(kubo, spec)
    assert fetch_run_spec(kubo, ref) == spec
    assert spec.pool_seed_bytes == bytes.fromhex("ab" * 32)
