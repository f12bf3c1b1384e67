"""Publishing and fetching checkpoints through a real (offline) Kubo daemon."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest
import torch

from ledger_client.ipfs.checkpoints import (
    CheckpointIncomplete,
    DiskFull,
    FetchedCheckpoint,
    InvalidCheckpointSource,
    ManifestNotFound,
    PinRetention,
    PublishedCheckpoint,
    ShardHashMismatch,
    ShardSizeMismatch,
    fetch_checkpoint,
    load_into,
    load_state_dict,
    publish_checkpoint,
)
from ledger_client.ipfs.checkpoints import files as checkpoint_files
from ledger_client.ipfs.kubo import KuboClient, KuboUnreachable
from protocol.digest import cid_to_digest, hex_text, raw_cid_of
from protocol.manifest import InvalidManifest, UnsupportedManifestVersion

torch.set_num_threads(1)
SMALL_SHARD = 8 * 1024


def tiny_llama() -> Any:
    """A random-init ~50k-parameter Llama in bf16 with tied embeddings."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=True)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).to(torch.bfloat16).eval()


def save_model_folder(model: Any, folder: Path) -> None:
    """A Hugging Face model folder with a character-level tokenizer built in code."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(["<unk>", "<pad>", *"abcdefghijklmnopqrstuvwxyz0123456789 "])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", pad_token="<pad>").save_pretrained(folder)
    model.save_pretrained(folder)


def bits(tensor: torch.Tensor) -> bytes:
    return tensor.contiguous().view(torch.uint8).numpy().tobytes()


def assert_bit_identical(left: dict[str, torch.Tensor], right: dict[str, torch.Tensor]) -> None:
    assert left.keys() == right.keys()
    for name in left:
        assert left[name].dtype == right[name].dtype and left[name].shape == right[name].shape, name
        assert bits(left[name]) == bits(right[name]), name


@pytest.fixture
def state() -> dict[str, torch.Tensor]:
    return {k: v for k, v in tiny_llama().state_dict().items()}


def test_state_dict_round_trips_bit_identically_through_the_on_chain_digest(
    kubo: KuboClient, state: dict[str, torch.Tensor], tmp_path: Path
) -> None:
    chain: list[tuple[int, bytes]] = []
    published = publish_checkpoint(kubo, state, step=5, shard_bytes=SMALL_SHARD,
                                   on_chain=lambda step, digest: chain.append((step, digest)))
    assert chain == [(5, published.digest)]
    assert published.digest == hashlib.sha256(published.manifest.to_bytes()).digest()
    assert len(published.manifest.shards) > 1
    assert published.manifest.aliases == {"lm_head.weight": "model.embed_tokens.weight"}

    fetched = fetch_checkpoint(kubo, hex_text(published.digest), tmp_path / "store")
    assert fetched.manifest == published.manifest
    loaded = load_state_dict(fetched)
    assert_bit_identical(loaded, state)
    assert loaded["lm_head.weight"] is loaded["model.embed_tokens.weight"]


def test_loaded_weights_are_memory_mapped_from_the_shard_files(
    kubo: KuboClient, state: dict[str, torch.Tensor], tmp_path: Path
) -> None:
    published = publish_checkpoint(kubo, state, step=1, shard_bytes=SMALL_SHARD)
    fetched = fetch_checkpoint(kubo, published.digest, tmp_path)
    model = load_into(tiny_llama(), fetched)
    maps = Path("/proc/self/maps").read_text()
    assert all(str(fetched.path / shard.name) in maps for shard in published.manifest.shards)
    assert_bit_identical(model.state_dict(), state)


def test_hugging_face_folder_round_trips_with_config_and_tokenizer(kubo: KuboClient, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = tiny_llama()
    save_model_folder(model, tmp_path / "model")
    published = publish_checkpoint(kubo, tmp_path / "model", step=2, parent=raw_cid_of(b"previous"))
    manifest = published.manifest
    assert manifest.config is not None and manifest.config["model_type"] == "llama"
    assert {f.name for f in manifest.tokenizer_files} >= {"tokenizer.json", "tokenizer_config.json"}
    assert manifest.dtype == "bfloat16" and manifest.parent == raw_cid_of(b"previous")

    fetched = fetch_checkpoint(kubo, published.manifest_cid, tmp_path / "store")
    again = AutoModelForCausalLM.from_pretrained(fetched.path).eval()
    tokenizer = AutoTokenizer.from_pretrained(fetched.path)
    ids = torch.tensor([tokenizer("abc 123")["input_ids"]])
    with torch.no_grad():
        assert torch.equal(again(ids).logits, model(ids).logits)


def test_interrupted_fetch_resumes_and_replaces_only_bad_files(
    kubo: KuboClient, state: dict[str, torch.Tensor], tmp_path: Path
) -> None:
    published = publish_checkpoint(kubo, state, step=3, shard_bytes=SMALL_SHARD)
    first = fetch_checkpoint(kubo, published.digest, tmp_path)
    names = [s.name for s in published.manifest.shards]
    assert len(names) >= 3
    (first.path / names[0]).unlink()  # never arrived
    with open(first.path / names[1], "r+b") as handle:  # tampered on disk
        handle.seek(100)
        handle.write(b"\xff\xfe")
    with open(first.path / names[2], "r+b") as handle:  # truncated
        handle.truncate(10)
    (first.path / f".{names[3 % len(names)]}.part").write_bytes(b"half")  # leftover of a killed fetch

    second = fetch_checkpoint(kubo, published.digest, tmp_path)
    assert sorted(second.downloaded) == sorted(names[:3])
    assert set(second.reused) == set(names[3:])
    assert not list(second.path.glob(".*.part"))
    assert_bit_identical(load_state_dict(second), state)


class InterruptAfterFirstFile:
    """Progress sink that interrupts the fetch like Ctrl-C once the first file is in place."""

    def start(self, total_bytes: int, total_files: int) -> None:
        pass

    def advance(self, n_bytes: int) -> None:
        pass

    def file_done(self, name: str) -> None:
        raise KeyboardInterrupt


def test_a_fetch_interrupted_midway_resumes_without_downloading_verified_shards_again(
    kubo: KuboClient, state: dict[str, torch.Tensor], tmp_path: Path
) -> None:
    published = publish_checkpoint(kubo, state, step=3, shard_bytes=SMALL_SHARD)
    with pytest.raises(KeyboardInterrupt):
        fetch_checkpoint(kubo, published.digest, tmp_path, parallel=1, progress=InterruptAfterFirstFile())
    with pytest.raises(CheckpointIncomplete):
        load_state_dict(tmp_path / published.manifest_cid)
    resumed = fetch_checkpoint(kubo, published.digest, tmp_path)
    names = [s.name for s in published.manifest.shards]
    assert resumed.reused == names[:1]
    assert resumed.downloaded == names[1:]
    assert_bit_identical(load_state_dict(resumed), state)


def _republish_with(kubo: KuboClient, published: PublishedCheckpoint, **shard_changes: Any) -> str:
    document = json.loads(published.manifest.to_bytes())
    document["shards"][0].update(shard_changes)
    return kubo.add_bytes(json.dumps(document).encode())


def test_a_shard_whose_hash_does_not_match_is_rejected_by_name(
    kubo: KuboClient, state: dict[str, torch.Tensor], tmp_path: Path
) -> None:
    published = publish_checkpoint(kubo, state, step=4, shard_bytes=SMALL_SHARD)
    lying = _republish_with(kubo, published, sha256="00" * 32)
    shard = published.manifest.shards[0].name
    with pytest.raises(ShardHashMismatch, match=shard):
        fetch_checkpoint(kubo, lying, tmp_path, retries=1)
    assert not (tmp_path / lying / shard).exists()
    with pytest.raises(CheckpointIncomplete):
        load_state_dict(tmp_path / lying)


@pytest.mark.parametrize("delta", [-1, +1])
def test_a_shard_of_the_wrong_size_is_rejected_by_name(
    kubo: KuboClient, state: dict[str, torch.Tensor], tmp_path: Path, delta: int
) -> None:
    published = publish_checkpoint(kubo, state, step=4, shard_bytes=SMALL_SHARD)
    wrong = _republish_with(kubo, published, size=published.manifest.shards[0].size + delta)
    with pytest.raises(ShardSizeMismatch, match=published.manifest.shards[0].name):
        fetch_checkpoint(kubo, wrong, tmp_path, retries=0)


class CorruptsFirstDownload(KuboClient):
    """A real client whose first download of each file arrives damaged (a flaky disk)."""

    def __init__(self, api: str) -> None:
        super().__init__(api)
        self.damaged: set[str] = set()

    def cat_to_file(self, cid: str, destination: Path, **kwargs: Any) -> str:  # type: ignore[override]
        sha = super().cat_to_file(cid, destination, **kwargs)
        if cid not in self.damaged:
            self.damaged.add(cid)
            return "0" * 64
        return sha


def test_a_damaged_download_is_fetched_again(
    kubo: KuboClient, state: dict[str, torch.Tensor], tmp_path: Path
) -> None:
    published = publish_checkpoint(kubo, state, step=6, shard_bytes=SMALL_SHARD)
    with CorruptsFirstDownload(kubo.api_multiaddr) as flaky:
        fetched = fetch_checkpoint(flaky, published.digest, tmp_path)
    assert fetched.retried == {s.name: 1 for s in published.manifest.shards}
    assert_bit_identical(load_state_dict(fetched), state)


def test_bad_manifests_and_digests_are_named_errors(kubo: KuboClient, tmp_path: Path) -> None:
    with pytest.raises(ManifestNotFound, match="no manifest behind digest 0x"):
        fetch_checkpoint(kubo, hashlib.sha256(b"nothing here").digest(), tmp_path, timeout=2)
    future = kubo.add_bytes(json.dumps({"schema_version": 99, "step": 1}).encode())
    with pytest.raises(UnsupportedManifestVersion):
        fetch_checkpoint(kubo, cid_to_digest(future), tmp_path)
    partial = kubo.add_bytes(json.dumps({"schema_version": 1, "step": 1}).encode())
    with pytest.raises(InvalidManifest, match="shards"):
        fetch_checkpoint(kubo, partial, tmp_path)
    assert not any(tmp_path.iterdir())


def test_unreachable_kubo_is_a_named_error(state: dict[str, torch.Tensor], tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with KuboClient(f"/ip4/127.0.0.1/tcp/{port}") as dead:
        with pytest.raises(KuboUnreachable, match=str(port)):
            publish_checkpoint(dead, state, step=1)
        with pytest.raises(KuboUnreachable, match=str(port)):
            fetch_checkpoint(dead, hashlib.sha256(b"x").digest(), tmp_path)


def test_disk_full_is_refused_before_downloading(
    kubo: KuboClient, state: dict[str, torch.Tensor], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    published = publish_checkpoint(kubo, state, step=8, shard_bytes=SMALL_SHARD)
    real_usage = shutil.disk_usage
    monkeypatch.setattr(checkpoint_files.shutil, "disk_usage",
                        lambda path: real_usage(path)._replace(free=1000))
    with pytest.raises(DiskFull, match="MiB free"):
        fetch_checkpoint(kubo, published.digest, tmp_path)
    assert not list((tmp_path / published.manifest_cid).glob("*.safetensors"))


def test_bad_sources_are_refused(kubo: KuboClient, tmp_path: Path) -> None:
    with pytest.raises(InvalidCheckpointSource, match="empty"):
        publish_checkpoint(kubo, {}, step=1)
    with pytest.raises(InvalidCheckpointSource, match="no \\*.safetensors"):
        publish_checkpoint(kubo, tmp_path, step=1)
    (tmp_path / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(InvalidCheckpointSource, match="model.safetensors"):
        publish_checkpoint(kubo, tmp_path, step=1)


def test_retention_keeps_the_newest_versions_pinned_and_drops_older_folders(
    kubo: KuboClient, tmp_path: Path
) -> None:
    frozen = torch.full((4000,), 7.0)  # a tensor that never changes between steps
    retention = PinRetention(kubo, tmp_path / "publisher-pins.json", keep=2)
    fetcher = PinRetention(kubo, tmp_path / "fetcher-pins.json", keep=2)
    published, fetched = [], []
    for step in range(4):
        state = {"frozen": frozen, "moving": torch.full((4000,), float(step))}
        published.append(publish_checkpoint(kubo, state, step=step, shard_bytes=16_000, retention=retention))
        fetched.append(fetch_checkpoint(kubo, published[-1].digest, tmp_path / "store", retention=fetcher))
    pinned = kubo.pin_ls()
    frozen_shard = published[0].manifest.shards[0].cid
    assert all(frozen_shard == p.manifest.shards[0].cid for p in published)
    assert frozen_shard in pinned
    for old in published[:2]:
        assert old.manifest_cid not in pinned
        assert old.manifest.shards[1].cid not in pinned
    for new in published[2:]:
        assert new.manifest_cid in pinned and new.manifest.shards[1].cid in pinned
    assert [v.step for v in retention.versions()] == [3, 2]
    assert [f.path.exists() for f in fetched] == [False, False, True, True]


def test_an_old_version_fetched_now_stays_until_the_next_fetch(kubo: KuboClient, tmp_path: Path) -> None:
    """A validator judging a dispute over old work fetches a checkpoint older than the newest `keep`: its folder
    must still be there to load (the demo's honest committee member once failed every vote on such work), and it
    goes at the next fetch."""
    published = [publish_checkpoint(kubo, {"w": torch.full((100,), float(step))}, step=step) for step in range(4)]
    fetcher = PinRetention(kubo, tmp_path / "pins.json", keep=2)
    for p in published[2:]:
        fetch_checkpoint(kubo, p.digest, tmp_path / "store", retention=fetcher)
    old = fetch_checkpoint(kubo, published[0].digest, tmp_path / "store", retention=fetcher)
    assert old.path.exists() and [v.step for v in fetcher.versions()] == [3, 2, 0]
    fetch_checkpoint(kubo, published[1].digest, tmp_path / "store", retention=fetcher)
    assert not old.path.exists() and [v.step for v in fetcher.versions()] == [3, 2, 1]


def test_fetched_checkpoint_reports_what_it_did(kubo: KuboClient, tmp_path: Path) -> None:
    published = publish_checkpoint(kubo, {"w": torch.ones(10)}, step=0)
    fetched = fetch_checkpoint(kubo, published.digest, tmp_path)
    assert isinstance(fetched, FetchedCheckpoint)
    assert fetched.downloaded == ["model-00001-of-00001.safetensors"] and fetched.reused == []
    assert fetched.digest == published.digest
