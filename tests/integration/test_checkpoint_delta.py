"""Policies as sparse patches against their parent, through real Kubo daemons: a fetcher holding the
parent rebuilds the shards from the patch bit for bit (checked against the manifest's sha256), and
falls back to downloading the shards when it lacks the parent or the patch is corrupt."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch

from ledger_client.ipfs.checkpoints import (
    InvalidDelta,
    apply_delta,
    encode_delta,
    fetch_checkpoint,
    load_state_dict,
    publish_checkpoint,
)
from ledger_client.ipfs.checkpoints.publish import DELTA_WORTH_FRACTION
from ledger_client.ipfs.kubo import KuboClient
from protocol.manifest import StoredFile, parse_manifest
from tests.integration.test_checkpoints import tiny_llama

SHARD = 32 * 1024


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.contiguous().view(-1).view(torch.uint8)


def _child(parent: dict[str, torch.Tensor], fraction: float = 0.01) -> dict[str, torch.Tensor]:
    """The parent with about `fraction` of every tensor's elements moved by one bf16 step or more."""
    generator = torch.Generator().manual_seed(1)
    child = {}
    for name, tensor in parent.items():
        moved = torch.rand(tensor.shape, generator=generator) < fraction
        child[name] = torch.where(moved, tensor * 1.05 + 0.01, tensor).to(tensor.dtype)
    return child


@pytest.fixture
def published(kubo_swarm):
    """A bf16 parent and child published on one node (the child with its delta), both nodes' clients."""
    publisher, fetcher = kubo_swarm(2)
    parent_state = {k: v.clone() for k, v in tiny_llama().state_dict().items()}
    child_state = _child(parent_state)
    with KuboClient(publisher.api_multiaddr) as kubo:
        parent = publish_checkpoint(kubo, parent_state, step=0, shard_bytes=SHARD)
        child = publish_checkpoint(kubo, child_state, step=1, parent=parent.manifest_cid, shard_bytes=SHARD,
                                   parent_state=parent_state)
    with KuboClient(publisher.api_multiaddr) as pub, KuboClient(fetcher.api_multiaddr) as fetch:
        yield pub, fetch, parent, child, child_state


def _assert_is(fetched, state: dict[str, torch.Tensor]) -> None:
    for shard in fetched.manifest.shards:
        assert hashlib.sha256((fetched.path / shard.name).read_bytes()).hexdigest() == shard.sha256
    loaded = load_state_dict(fetched)
    for name, tensor in state.items():
        assert torch.equal(_bits(loaded[name]), _bits(tensor)), name


def test_a_fetcher_holding_the_parent_rebuilds_the_policy_from_the_delta_bit_for_bit(published, tmp_path):
    _, kubo, parent, child, child_state = published
    assert child.manifest.delta is not None and child.manifest.parent == parent.manifest_cid
    assert len(child.manifest.shards) > 1 and child.patch_ratio < 0.1
    fetch_checkpoint(kubo, parent.digest, tmp_path)
    fetched = fetch_checkpoint(kubo, child.digest, tmp_path)
    assert sorted(fetched.patched) == sorted(s.name for s in child.manifest.shards)
    assert not set(fetched.downloaded) & set(fetched.patched) and fetched.delta_fallback is None
    _assert_is(fetched, child_state)


def test_a_fetcher_without_the_parent_downloads_the_full_shards(published, tmp_path):
    _, kubo, _, child, child_state = published
    fetched = fetch_checkpoint(kubo, child.digest, tmp_path)
    assert fetched.patched == [] and fetched.delta_fallback == "the parent checkpoint is not held locally"
    assert set(fetched.downloaded) >= {s.name for s in child.manifest.shards}
    _assert_is(fetched, child_state)


@pytest.mark.parametrize("corruption", ["wrong values", "garbage"])
def test_a_corrupt_delta_falls_back_to_the_full_shards(published, tmp_path, corruption):
    publisher, kubo, parent, child, child_state = published
    parent_state = load_state_dict(fetch_checkpoint(kubo, parent.digest, tmp_path))
    if corruption == "wrong values":  # a well-formed patch computed against another parent
        patch = encode_delta(_child(parent_state, fraction=0.02), child_state)
    else:
        good = encode_delta(parent_state, child_state)
        patch = good[:20] + bytes(b ^ 0xFF for b in good[20:60]) + good[60:]
    bad = StoredFile(name="model.delta", cid=publisher.add_bytes(patch), sha256=hashlib.sha256(patch).hexdigest(),
                     size=len(patch))
    manifest_cid = publisher.add_bytes(child.manifest.model_copy(update={"delta": bad}).to_bytes())
    fetched = fetch_checkpoint(kubo, manifest_cid, tmp_path)
    assert fetched.patched == []
    expected = "rebuilt shards do not match the manifest" if corruption == "wrong values" else "delta unusable"
    assert fetched.delta_fallback.startswith(expected)
    assert set(fetched.downloaded) >= {s.name for s in child.manifest.shards}
    _assert_is(fetched, child_state)


def test_a_policy_that_changed_most_values_goes_out_without_a_patch(kubo_swarm, tmp_path):
    """A float32 step moves nearly every value: the patch would be nearly the shards' size, so none is published,
    and a fetcher holding the parent downloads the shards; the patch's size against the shards is what decided."""
    publisher, fetcher = kubo_swarm(2)
    parent_state = {k: v.clone() for k, v in tiny_llama().state_dict().items()}
    moved = _child(parent_state, fraction=1.0)
    assert encode_delta(parent_state, moved, max_fraction=DELTA_WORTH_FRACTION) is None  # over half the shards
    assert encode_delta(parent_state, _child(parent_state), max_fraction=DELTA_WORTH_FRACTION) is not None
    with KuboClient(publisher.api_multiaddr) as pub, KuboClient(fetcher.api_multiaddr) as kubo:
        parent = publish_checkpoint(pub, parent_state, step=0, shard_bytes=SHARD)
        child = publish_checkpoint(pub, moved, step=1, parent=parent.manifest_cid, shard_bytes=SHARD,
                                   parent_state=parent_state)
        assert child.manifest.delta is None and child.patch_ratio is None
        fetch_checkpoint(kubo, parent.digest, tmp_path)
        fetched = fetch_checkpoint(kubo, child.digest, tmp_path)
        assert fetched.patched == [] and set(fetched.downloaded) >= {s.name for s in child.manifest.shards}
        _assert_is(fetched, moved)


def test_delta_round_trip_is_bit_exact_for_every_dtype_and_refuses_a_wrong_parent():
    parent = {"w": torch.randn(64, 8).bfloat16(), "f": torch.randn(100), "i": torch.arange(10), "e": torch.empty(0)}
    child = {k: v.clone() for k, v in parent.items()}
    child["f"][7] = float("nan")
    child["f"][8] = -0.0 if parent["f"][8] == 0 else -parent["f"][8]
    child["w"].view(-1)[::50] += 1
    child["new"] = torch.ones(3, dtype=torch.float16)
    rebuilt = apply_delta(encode_delta(parent, child), parent)
    assert list(rebuilt) == list(child)
    for name, tensor in child.items():
        assert rebuilt[name].dtype == tensor.dtype and torch.equal(_bits(rebuilt[name]), _bits(tensor)), name
    with pytest.raises(InvalidDelta, match="the parent has no bfloat16 tensor w"):
        apply_delta(encode_delta(parent, child), {**parent, "w": torch.zeros(3).bfloat16()})
    with pytest.raises(InvalidDelta, match="bad magic"):
        apply_delta(b"not a delta", parent)


def test_a_manifest_without_delta_keeps_its_bytes_and_a_delta_needs_a_parent(published):
    _, _, parent, child, _ = published
    assert b'"delta"' not in parent.manifest.to_bytes() and b'"metrics"' not in parent.manifest.to_bytes()
    assert parse_manifest(parent.manifest.to_bytes()) == parent.manifest
    document = json.loads(child.manifest.to_bytes())
    assert document["delta"]["name"] == "model.delta"
    document["parent"] = None
    with pytest.raises(Exception, match="names a delta but no parent"):
        parse_manifest(json.dumps(document).encode())
