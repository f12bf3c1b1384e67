"""Checkpoint manifest, shard planning and tied-weight handling: unit tests (no Kubo)."""

from __future__ import annotations

import json

import pytest
import torch

from ledger_client.ipfs.checkpoints import plan_shards, split_aliases
from protocol.digest import DAG_PB, digest_to_cid, raw_cid_of
from protocol.manifest import CheckpointManifest, InvalidManifest, UnsupportedManifestVersion, parse_manifest

SHA = "ab" * 32
SHARD_CID = digest_to_cid(bytes(32), DAG_PB)
VALID = {
    "schema_version": 1,
    "step": 7,
    "parent": None,
    "config": {"model_type": "llama"},
    "tokenizer_files": [{"name": "tokenizer.json", "cid": raw_cid_of(b"tok"), "sha256": SHA, "size": 3}],
    "dtype": "bfloat16",
    "shards": [{"name": "model-00001-of-00001.safetensors", "cid": SHARD_CID, "sha256": SHA, "size": 10,
                "tensors": ["w", "b"]}],
    "aliases": {"head": "w"},
}


def _with(**changes: object) -> bytes:
    return json.dumps({**VALID, **changes}).encode()


def test_a_valid_manifest_round_trips_through_its_canonical_bytes() -> None:
    manifest = parse_manifest(json.dumps(VALID).encode())
    assert isinstance(manifest, CheckpointManifest)
    assert parse_manifest(manifest.to_bytes()) == manifest
    assert manifest.tensor_names == {"w", "b", "head"}
    assert manifest.total_bytes == 13


def test_unknown_schema_version_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedManifestVersion, match="schema_version 2"):
        parse_manifest(_with(schema_version=2))


@pytest.mark.parametrize("missing", ["step", "shards", "dtype", "aliases", "schema_version"])
def test_missing_fields_are_refused(missing: str) -> None:
    document = {k: v for k, v in VALID.items() if k != missing}
    with pytest.raises(InvalidManifest, match=missing):
        parse_manifest(json.dumps(document).encode())


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[1, 2]",
        _with(extra_field=1),
        _with(step=-1),
        _with(shards=[]),
        _with(shards=[{**VALID["shards"][0], "sha256": "xyz"}]),  # type: ignore[dict-item]
        _with(shards=[{**VALID["shards"][0], "name": "../../etc/passwd"}]),  # type: ignore[dict-item]
        _with(shards=[{**VALID["shards"][0], "cid": "QmNotACid"}]),  # type: ignore[dict-item]
        _with(parent="not-a-cid"),
        _with(aliases={"head": "nowhere"}),
        _with(aliases={"w": "b"}),
        _with(shards=[VALID["shards"][0], {**VALID["shards"][0], "name": "other.safetensors"}]),  # type: ignore[index]
    ],
)
def test_malformed_manifests_are_refused_in_one_line(data: bytes) -> None:
    with pytest.raises(InvalidManifest) as info:
        parse_manifest(data)
    assert "\n" not in str(info.value)


def test_shards_fill_up_to_the_size_and_a_big_tensor_gets_its_own() -> None:
    sizes = [("a", 40), ("b", 40), ("c", 40), ("huge", 500), ("d", 10), ("e", 100)]
    assert plan_shards(sizes, 100) == [["a", "b"], ["c"], ["huge"], ["d"], ["e"]]
    assert plan_shards(sizes, 10_000) == [["a", "b", "c", "huge", "d", "e"]]
    with pytest.raises(ValueError):
        plan_shards(sizes, 0)


def test_tied_weights_become_aliases_and_overlapping_views_are_copied() -> None:
    embedding = torch.arange(12.0).reshape(3, 4)
    fused = torch.arange(8.0)
    state = {"embed": embedding, "head": embedding, "q": fused[:4], "k": fused[4:], "bias": torch.ones(2)}
    stored, aliases = split_aliases(state)
    assert aliases == {"head": "embed"}
    assert set(stored) == {"embed", "q", "k", "bias"}
    assert stored["q"].untyped_storage().data_ptr() != stored["k"].untyped_storage().data_ptr()
    assert torch.equal(stored["k"], torch.arange(4.0, 8.0))


def test_a_manifest_without_metrics_keeps_its_old_bytes_and_one_with_metrics_names_a_cid() -> None:
    old = parse_manifest(json.dumps(VALID).encode())
    assert old.metrics is None
    assert b"metrics" not in old.to_bytes()  # digests of manifests from before the field are unchanged
    cid = raw_cid_of(b'{"step":7}')
    with_metrics = parse_manifest(_with(metrics=cid))
    assert with_metrics.metrics == cid
    assert parse_manifest(with_metrics.to_bytes()) == with_metrics
    with pytest.raises(InvalidManifest, match="metrics"):
        parse_manifest(_with(metrics="not-a-cid"))
