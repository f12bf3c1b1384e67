"""The trainer on torch.distributed (gloo, world size 2): FSDP2 and DDP train like one process, resume
from a sharded (torch.distributed.checkpoint) trainer checkpoint is exact, and the published
policies stay ordinary Hugging Face folders.

Each run is the real CLI (`trainer local [--nproc 2]`) in a subprocess, over the same rollout files.
"""

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from cli.errors import EXIT_USAGE
from ledger_client.ipfs.checkpoints.publish import DELTA_WORTH_FRACTION
from protocol.digest import hex_text
from protocol.rollouts import (
    RolloutBatch,
    RolloutHeader,
    RolloutSample,
    write_rollout_file,
)
from protocol.runspec import SamplingSpec
from protocol.submission import local_binding
from tests.support.paths import ROOT
from trainer.local_cli import main as trainer_local_main

G = 4
SAMPLING = SamplingSpec(group_size=G, temperature=1.0, max_tokens=5)
STEPS = 3
ARGS = ["--model.hidden", "16", "--model.layers", "2", "--model.heads", "2", "--sampling.group_size", str(G),
        "--sampling.max_tokens", "5", "--batch_samples", str(2 * G), "--async_level", "10", "--wait_timeout_s", "5"]


def _rollouts(folder: Path) -> None:
    """STEPS files of two groups each (one batch per step), oldest first."""
    folder.mkdir(parents=True)
    for i in range(STEPS):
        rng = random.Random(i)
        header = RolloutHeader.bound(local_binding("0x" + "ab" * 20, 0, i), manifest_digest="0x" + "00" * 32,
                                     task={"name": "test"}, sampling=SAMPLING, proof_chunk=0)
        samples = []
        for g in range(2):
            prompt = [1] + [rng.randrange(4, 16) for _ in range(3)]
            for s in range(G):
                n = rng.randint(1, 5)
                samples.append(RolloutSample(
                    group=g, sample=s, prompt_index=g, prompt_ids=prompt,
                    completion_ids=[rng.randrange(4, 16) for _ in range(n)], logprobs=[-1.0] * n,
                    reward=float((s + i) % 2 or s == 3), finish_reason="eos", seed=s, proofs=[],
                ))
        path = folder / f"{i:03d}.parquet"
        write_rollout_file(path, RolloutBatch(header=header, samples=samples))
        os.utime(path, ns=(i * 10**9, i * 10**9))


def _trainer_local(run_dir: Path, *extra: str, max_steps: int = STEPS) -> subprocess.CompletedProcess:
    if not (run_dir / "rollouts").exists():
        _rollouts(run_dir / "rollouts")
    return subprocess.run(
        [sys.executable, "-m", "trainer.main", "local", "--run_dir", str(run_dir), "--max_steps", str(max_steps),
         *ARGS, *extra],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=300,
    )


def _ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr[-3000:]


def _policy(run_dir: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(run_dir / "policy" / f"step_{step:06d}" / "model.safetensors")


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One-process, FSDP2 and DDP runs of STEPS steps over the same files."""
    root = tmp_path_factory.mktemp("distributed")
    _ok(_trainer_local(root / "single"))
    _ok(_trainer_local(root / "fsdp", "--nproc", "2"))
    _ok(_trainer_local(root / "ddp", "--nproc", "2", "--parallel", "ddp"))
    return root


@pytest.mark.parametrize("strategy", ["fsdp", "ddp"])
def test_two_ranks_train_like_one_process(runs, strategy):
    single, parallel = runs / "single", runs / strategy
    for one, two in zip(_metrics(single), _metrics(parallel), strict=True):
        assert one["step"] == two["step"]
        for key in ("loss", "policy_loss", "entropy", "grad_norm", "mean_ratio", "logprob_mismatch", "clipped_fraction",
                    "is_weight_mean", "is_weight_max", "is_weight_min", "is_truncated_fraction"):
            assert two[key] == pytest.approx(one[key], rel=1e-5, abs=1e-7), (one["step"], key)
    # the files were sampled by policy 0: from step 2 on the IS weights π_prox/π_behav are no longer all 1
    assert _metrics(single)[-1]["is_weight_max"] > 1.0 > _metrics(single)[-1]["is_weight_min"]
    initial, expected, got = _policy(single, 0), _policy(single, STEPS), _policy(parallel, STEPS)
    assert any(not torch.equal(initial[k], expected[k]) for k in expected)  # training did move the weights
    for name, tensor in expected.items():
        torch.testing.assert_close(got[name], tensor, rtol=1e-5, atol=1e-7, msg=name)


def test_ranks_with_unequal_rows_micro_batch_without_changing_the_result(tmp_path):
    """3 ranks share 8 rows as 3 / 3 / 2, two updates per step (so the π_prox pass runs too), once in one pass
    per mini-batch and once one row per micro-batch: a rank with fewer rows in a mini-batch then runs passes that
    add nothing, so all ranks join every forward and backward collective, and the training is the same."""
    args = ("--nproc", "3", "--optim.updates_per_step", "2")
    whole, micro = tmp_path / "whole", tmp_path / "micro"
    _ok(_trainer_local(whole, *args))
    _ok(_trainer_local(micro, *args, "--micro_batch_tokens", "1"))
    # each rank's rows split into mini-batches 2 + 1 / 2 + 1 / 1 + 1: the third rank pads its first
    assert [m["micro_batches"] for m in _metrics(whole)] == [2] * STEPS
    assert [m["micro_batches"] for m in _metrics(micro)] == [3] * STEPS
    for one, other in zip(_metrics(whole), _metrics(micro), strict=True):
        for key in ("loss", "policy_loss", "entropy", "grad_norm", "clipped_fraction", "is_weight_mean"):
            assert other[key] == pytest.approx(one[key], rel=1e-5, abs=1e-7), (one["step"], key)
    expected = _policy(whole, STEPS)
    for name, tensor in _policy(micro, STEPS).items():
        torch.testing.assert_close(tensor, expected[name], rtol=1e-5, atol=1e-7, msg=name)


def test_fsdp2_checkpoints_are_sharded_and_the_published_policy_is_a_plain_hf_folder(runs):
    checkpoint = runs / "fsdp" / "checkpoints" / f"step_{STEPS:06d}"
    assert sorted(p.name for p in (checkpoint / "sharded").glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    assert json.loads((checkpoint / "trainer.json").read_text())["world_size"] == 2
    model = AutoModelForCausalLM.from_pretrained(runs / "fsdp" / "policy" / f"step_{STEPS:06d}")
    for name, tensor in _policy(runs / "fsdp", STEPS).items():
        assert torch.equal(model.state_dict()[name], tensor)


def test_resume_from_a_sharded_checkpoint_is_exact(runs, tmp_path):
    resumed = tmp_path / "resumed"
    _ok(_trainer_local(resumed, "--nproc", "2", max_steps=STEPS - 1))
    (resumed / "trainer.done").unlink()
    _ok(_trainer_local(resumed, "--nproc", "2"))
    straight = _policy(runs / "fsdp", STEPS)
    for name, tensor in _policy(resumed, STEPS).items():
        assert torch.equal(tensor, straight[name]), name
    assert _metrics(resumed)[-1]["loss"] == _metrics(runs / "fsdp")[-1]["loss"]
    assert [m["step"] for m in _metrics(resumed)] == list(range(1, STEPS + 1))


def test_a_one_process_checkpoint_is_not_resumed_sharded(runs, tmp_path):
    shutil.copytree(runs / "single", tmp_path / "run")
    result = _trainer_local(tmp_path / "run", "--nproc", "2", max_steps=STEPS + 1)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        (f"error: {tmp_path / 'run' / 'checkpoints' / f'step_{STEPS:06d}'} is a one-process checkpoint; "
         "resume it without --nproc")]


def test_fsdp2_checkpoints_keep_each_ranks_retained_policy_shards_and_an_older_checkpoint_is_refused(runs, tmp_path):
    shutil.copytree(runs / "fsdp", tmp_path / "run")
    checkpoint = tmp_path / "run" / "checkpoints" / f"step_{STEPS:06d}"
    state = json.loads((checkpoint / "trainer.json").read_text())
    assert (state["policy_steps"], state["policy_dtype"]) == (list(range(STEPS + 1)), "bfloat16")  # async level 10
    # an older trainer kept whole float32 policies in state.pt and wrote no policy_steps
    (checkpoint / "trainer.json").write_text(json.dumps({k: v for k, v in state.items() if not k.startswith("policy_")}))
    result = _trainer_local(tmp_path / "run", "--nproc", "2", max_steps=STEPS + 1)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {checkpoint} keeps its retained policies whole (an older trainer's); resume it with the trainer that "
        "wrote it, or start the run afresh"]


@pytest.mark.parametrize("value", ["0", "two"])
def test_a_bad_nproc_is_refused_in_one_line(tmp_path, value, capsys):
    assert trainer_local_main(["--run_dir", str(tmp_path / "run"), "--nproc", value, *ARGS]) == EXIT_USAGE
    assert capsys.readouterr().err.splitlines() == [f"error: --nproc must be a positive integer, got {value!r}"]
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_trainer_start_on_two_ranks_publishes_every_policy_from_rank_0(tmp_path, kubo_node):
    from ledger_client.chain.queries import wait_for
    from ledger_client.ipfs.checkpoints import fetch_checkpoint
    from ledger_client.ipfs.kubo import KuboClient
    from tests.e2e.test_protocol import Protocol

    protocol = Protocol(tmp_path, kubo_node)
    run_dir = tmp_path / "trainer"
    workers = [protocol.worker(i, per_step=3) for i in (4, 5)]
    validator = protocol.validator()
    command = [sys.executable, "-m", "trainer.main", "start", "--nproc", "2", "--pool", str(protocol.pool_id),
               "--key", protocol.accounts[2].key.to_0x_hex(), "--set", f"run_dir={run_dir}", "--set", "max_steps=2",
               "--set", "batch_samples=8", "--set", "wait_timeout_s=120", "--json", "--no-wait-final",  # W is an hour; finality: test_trainer_finality.py
               "--rpc-url", protocol.anvil.rpc_url, "--deployments", str(protocol.deployments),
               "--kubo-api", protocol.kubo_api]
    trainer = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stop = threading.Event()
        while trainer.poll() is None:
            for w in workers:
                w.step_once(stop)
            validator.run_once()
            time.sleep(0.2)
        out, err = trainer.communicate(timeout=60)
        assert trainer.returncode == 0, err[-3000:]
        lines = [json.loads(line) for line in out.splitlines()]
        assert [line["step"] for line in lines] == [1, 2]  # rank 0 alone reports
        # a policy goes out with a patch only when it is at most half the shards (float32 steps move most values)
        assert all(line["patch_ratio"] is None or 0 < line["patch_ratio"] <= DELTA_WORTH_FRACTION for line in lines)
        digests = [bytes(protocol.ledger(0).pool.checkpoint_at(protocol.pool_id, s)) for s in (1, 2)]
        assert all(d != bytes(32) for d in digests)
        assert [hex_text(d) for d in digests] == [line["checkpoint"] for line in lines]
        with KuboClient(protocol.kubo_api) as kubo:
            fetched = fetch_checkpoint(kubo, digests[1], tmp_path / "fetched")
        model = AutoModelForCausalLM.from_pretrained(fetched.path)
        assert sum(p.numel() for p in model.parameters()) > 0
        assert wait_for(lambda: (run_dir / "trainer.done").exists(), timeout=5)
    finally:
        if trainer.poll() is None:
            trainer.kill()
        validator.close()
        protocol.close()
