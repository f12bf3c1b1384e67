"""`--device`, `--dtype` and `--backend` of `worker start`, `validator start` and `trainer start`: what they
accept, what they refuse (one `error:` line, exit code 2, before any chain or IPFS call), and that the choice
reaches the worker's backend, the validator's checker processes and the trainer's process group. CPU only;
the CUDA cases skip without a GPU."""

from __future__ import annotations

import argparse
import importlib.util
import pickle
import sys
from pathlib import Path

import pytest
import torch

from cli.errors import EXIT_USAGE
from inference.device import Compute, ComputeChoiceError, choose_compute, parse_device, require_vllm
from inference.tiny import build_char_tokenizer, build_tiny_llama, char_vocab
from inference.torch_backend import TorchBackend
from protocol.errors import InvalidInput
from protocol.rollouts import decode_rollouts
from protocol.runspec import RunSpec, SamplingSpec
from protocol.submission import SubmissionBinding
from tests.unit.trainer.test_trainer import _batch, _config
from tests.unit.trainer.test_trainer import _model as _trainer_model
from trainer.distributed import process_group_backend, rank_device
from trainer.loop import Trainer
from trainer.main import main as trainer_main
from trainer.work_source import InMemorySource
from validator.cli import main as validator_main
from worker.cli import _parser as worker_parser
from worker.cli import main as worker_main
from worker.policy import Policy
from worker.produce import Producer, backend_of, produce_rollout_file

SPEC = RunSpec(task={"name": "sort", "seed": 0, "params": {"min_digits": 3, "max_digits": 3}},
               sampling=SamplingSpec(group_size=2, temperature=1.0, max_tokens=6), prompts_per_submission=1,
               pool_seed="0x" + "7f" * 32)
VLLM_INSTALLED = importlib.util.find_spec("vllm") is not None


def _no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def _two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend to be a machine with two CUDA devices (only the checks look: nothing runs there)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


def _vllm_found(monkeypatch: pytest.MonkeyPatch, found: bool) -> None:
    original = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: (object() if found else None) if name == "vllm" else original(name, *a))


def _chain(tmp_path: Path) -> list[str]:
    """Chain options that fail if anything contacts the chain (a dead RPC, an empty deployments file)."""
    deployments = tmp_path / "deployments.json"
    deployments.write_text("{}")
    return ["--rpc-url", "http://127.0.0.1:1", "--deployments", str(deployments), "--key", "0x" + "01" * 32,
            "--devnet-dir", str(tmp_path / "no-devnet")]


# ---- the shared checks (inference/device.py) ------------------------------------------------------------------


@pytest.mark.parametrize(("text", "canonical"), [("cpu", "cpu"), ("cpu:0", "cpu")])
def test_cpu_is_accepted_in_its_canonical_form(text: str, canonical: str) -> None:
    assert parse_device(text) == canonical


@pytest.mark.parametrize("text", ["bogus", "", "CUDA", "cuda:x", "cuda:-1", "mps", "meta", "cpu:1"])
def test_unknown_devices_are_refused_naming_the_flag(text: str) -> None:
    with pytest.raises(ComputeChoiceError, match="^--device "):
        parse_device(text)


def test_cuda_is_refused_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_cuda(monkeypatch)
    for text in ("cuda", "cuda:0"):
        with pytest.raises(ComputeChoiceError, match="no CUDA device"):
            parse_device(text)


def test_cuda_devices_are_checked_against_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    _two_gpus(monkeypatch)
    assert [parse_device(t) for t in ("cuda", "cuda:0", "cuda:1")] == ["cuda", "cuda:0", "cuda:1"]
    with pytest.raises(ComputeChoiceError, match="2 CUDA device"):
        parse_device("cuda:2")


def test_dtypes_and_backends() -> None:
    assert choose_compute(None) == Compute("torch", "cpu", "float32")  # the default: unchanged behaviour
    assert choose_compute("cpu", "bfloat16").torch_dtype == torch.bfloat16
    for dtype in ("float16", "fp32", "bf16"):
        with pytest.raises(ComputeChoiceError, match="--dtype"):
            choose_compute("cpu", dtype)
    with pytest.raises(ComputeChoiceError, match="--backend 'jax'"):
        choose_compute("cpu", None, "jax")


def test_vllm_is_refused_with_the_install_line_when_it_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    _vllm_found(monkeypatch, False)
    with pytest.raises(ComputeChoiceError, match=r"pip install '\.\[vllm\]'"):
        require_vllm()
    with pytest.raises(ComputeChoiceError, match=r"pip install '\.\[vllm\]'"):
        choose_compute(None, None, "vllm")


def test_vllm_runs_on_the_gpu_it_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    _vllm_found(monkeypatch, True)
    _two_gpus(monkeypatch)
    assert choose_compute(None, "bfloat16", "vllm") == Compute("vllm", "cuda", "bfloat16")
    assert choose_compute("cuda", None, "vllm") == Compute("vllm", "cuda", "float32")
    with pytest.raises(ComputeChoiceError, match="CUDA_VISIBLE_DEVICES=1"):
        choose_compute("cuda:1", None, "vllm")
    with pytest.raises(ComputeChoiceError, match="needs an NVIDIA GPU"):
        choose_compute("cpu", None, "vllm")
    _no_cuda(monkeypatch)
    with pytest.raises(ComputeChoiceError, match="no CUDA device"):
        choose_compute(None, None, "vllm")


# ---- the role CLIs refuse bad values in one line, before the chain --------------------------------------------


def _refusals() -> list[tuple[str, list[str], str]]:
    return [
        ("worker", ["--device", "bogus"], "--device 'bogus'"),
        ("worker", ["--device", "cuda"], "no CUDA device"),
        ("worker", ["--device", "cuda:1"], "no CUDA device"),
        ("worker", ["--dtype", "float16"], "--dtype 'float16'"),
        ("worker", ["--backend", "jax"], "--backend 'jax'"),
        ("worker", ["--backend", "vllm"], "pip install '.[vllm]'"),
        ("validator", ["--device", "bogus"], "--device 'bogus'"),
        ("validator", ["--device", "cuda"], "no CUDA device"),
        ("trainer", ["--device", "bogus"], "--device 'bogus'"),
        ("trainer", ["--device", "cuda"], "no CUDA device"),
        ("trainer", ["--device", "cuda", "--nproc", "2"], "no CUDA device"),
    ]


@pytest.mark.parametrize(("role", "flags", "message"), _refusals())
def test_role_clis_refuse_bad_compute_flags_in_one_line(role: str, flags: list[str], message: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    _no_cuda(monkeypatch)
    _vllm_found(monkeypatch, False)
    main = {"worker": worker_main, "validator": validator_main, "trainer": trainer_main}[role]
    argv = ["start", "--pool", "1", "--kubo-api", "/ip4/127.0.0.1/tcp/1", *_chain(tmp_path), *flags]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert message in lines[0], lines[0]


@pytest.mark.parametrize(("flags", "message"), [
    (["--device", "cuda:1", "--nproc", "2"], "each rank takes its own GPU"),
    (["--device", "cuda", "--nproc", "3"], "needs one GPU per rank; this machine has 2"),
])
def test_trainer_refuses_a_gpu_layout_that_is_not_one_gpu_per_rank(flags: list[str], message: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _two_gpus(monkeypatch)
    assert trainer_main(["start", "--pool", "1", *_chain(tmp_path), *flags]) == EXIT_USAGE
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines


def test_a_good_choice_gets_past_the_check_to_the_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--device cpu --dtype bfloat16` is accepted: the command goes on and fails at the dead RPC (exit 1)."""
    argv = ["start", "--pool", "1", "--kubo-api", "/ip4/127.0.0.1/tcp/1", *_chain(tmp_path)]
    assert worker_main([*argv, "--device", "cpu", "--dtype", "bfloat16"]) == 1
    assert validator_main([*argv, "--device", "cpu"]) == 1
    assert trainer_main([*argv, "--device", "cpu"]) == 1
    assert "--device" not in capsys.readouterr().err


# ---- the worker: the choice reaches the backend it generates with ---------------------------------------------


def _policy(folder: Path | None = None) -> Policy:
    model = build_tiny_llama(len(char_vocab()), seed=3, hidden=16, layers=1, heads=2)
    return Policy(0, b"\x11" * 32, model, build_char_tokenizer(), folder=folder)


def test_worker_start_flags_reach_the_torch_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import worker.daemon as daemon

    args = worker_parser().parse_args(["start", "--pool", "1", "--kubo-api", "/ip4/127.0.0.1/tcp/1",
                                       "--work-dir", str(tmp_path), "--device", "cpu", "--dtype", "bfloat16"])
    handed: dict[str, object] = {}

    class Stop(Exception):
        pass

    def fake_daemon(ledger, options, producer, loader, **_):
        handed["producer"] = producer
        raise Stop

    monkeypatch.setattr(daemon, "open_ledger", lambda a: argparse.Namespace(address="0x" + "ab" * 20))
    monkeypatch.setattr(daemon, "WorkerDaemon", fake_daemon)
    with pytest.raises(Stop):
        daemon.run_from_args(args)
    producer = handed["producer"]
    assert isinstance(producer, Producer) and producer.compute == Compute("torch", "cpu", "bfloat16")

    policy = _policy()
    backend = producer.backend_for(policy)
    assert isinstance(backend, TorchBackend) and backend.device == torch.device("cpu")
    assert {p.dtype for p in backend.model.parameters()} == {torch.bfloat16}
    assert producer.backend_for(policy) is backend  # one backend per policy
    assert producer.backend_for(_policy()) is not backend  # a new policy gets its own


def test_the_producer_writes_a_file_in_the_chosen_dtype() -> None:
    policy = _policy()
    binding = SubmissionBinding(chain_id=1, pool_contract="0x" + "00" * 20, pool_id=1, worker="0x" + "ab" * 20,
                                step=0, nonce=0)
    data, n = Producer(Compute("torch", "cpu", "bfloat16"))(policy, SPEC, binding)
    assert n == SPEC.prompts_per_submission * SPEC.sampling.group_size == len(decode_rollouts(data).samples)
    assert next(policy.model.parameters()).dtype == torch.bfloat16


def test_the_default_worker_is_the_float32_cpu_worker() -> None:
    args = worker_parser().parse_args(["start", "--pool", "1"])
    from worker.daemon import compute_of

    assert compute_of(args) == Compute("torch", "cpu", "float32")
    binding = SubmissionBinding(chain_id=1, pool_contract="0x" + "00" * 20, pool_id=1, worker="0x" + "ab" * 20,
                                step=0, nonce=4)
    # the same bytes as the worker made before it had a choice
    assert Producer(compute_of(args))(_policy(), SPEC, binding) == produce_rollout_file(_policy(), SPEC, binding)


def test_a_vllm_worker_without_a_policy_folder_is_refused_without_importing_vllm() -> None:
    vllm_loaded = "vllm" in sys.modules
    with pytest.raises(InvalidInput, match="Hugging Face folder"):
        backend_of(_policy(folder=None), Compute("vllm", "cuda", "bfloat16"))
    assert ("vllm" in sys.modules) == vllm_loaded


# ---- the validator: the checker processes receive the device ---------------------------------------------------


def test_the_checker_factory_carries_the_device_into_the_checker(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import validator.checks as checks
    from validator.config import DaemonConfig

    config = DaemonConfig(pool_id=7, state_dir=tmp_path, kubo_api="/ip4/127.0.0.1/tcp/1", device="cuda:1")
    factory = checks.checker_factory(config, "http://127.0.0.1:1", "deployments.json", threads=None,
                                     max_batch_tokens=256)
    factory = pickle.loads(pickle.dumps(factory))  # what a spawned checker process receives
    built: dict[str, object] = {}
    monkeypatch.setattr(checks, "RolloutChecker", lambda *a, **kw: built.update(args=a, kwargs=kw) or "checker")
    monkeypatch.setattr(torch, "set_num_threads", lambda n: built.update(threads=n))
    assert factory() == "checker"
    assert built["kwargs"] == {"device": "cuda:1", "max_batch_tokens": 256}
    assert built["args"] == ("http://127.0.0.1:1", "deployments.json", "/ip4/127.0.0.1/tcp/1", 7, tmp_path / "cache")
    assert built["threads"] == checks.DEFAULT_CHECKER_THREADS
    assert DaemonConfig(pool_id=7, state_dir=tmp_path, kubo_api="x").device == "cpu"


def test_the_checker_prefills_on_its_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import validator.checks as checks

    made: list[dict] = []
    fetched = argparse.Namespace(path=tmp_path, manifest=argparse.Namespace(verification=None))
    monkeypatch.setattr(checks, "fetch_checkpoint", lambda *a, **kw: fetched)
    policy = _policy()
    monkeypatch.setattr(checks, "TorchBackend", lambda model, **kw: made.append(kw) or "backend")
    checker = object.__new__(checks.RolloutChecker)  # no chain: only what _policy reads
    checker.device, checker.kubo, checker.cache_dir = "cuda:1", None, tmp_path
    checker.retention, checker._policies, checker._unrunnable = argparse.Namespace(keep=2), {}, {}
    checker.spec, checker.max_batch_tokens = SPEC, 1024
    checker._load_policy = lambda folder: (policy.model, policy.tokenizer)
    backend, tokenizer, config = checker._policy(0, b"\x22" * 32)
    assert (backend, tokenizer) == ("backend", policy.tokenizer)
    assert config == checks.verify_config_of(SPEC, 1024)  # a manifest without tolerances: the run spec's rules
    assert made[0]["device"] == "cuda:1" and "compute_dtype" not in made[0]  # the reference stays float32


# ---- the trainer: one GPU per rank, NCCL between them -----------------------------------------------------------


def test_ranks_take_one_gpu_each_and_talk_nccl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert rank_device("cuda") == "cuda:1"
    assert rank_device("cpu") == "cpu"
    assert process_group_backend("cuda:1") == "cpu:gloo,cuda:nccl"
    assert process_group_backend("cpu") == "gloo"  # unchanged on the CPU
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert rank_device("cuda:0") == "cuda:0"


def test_the_trainer_trains_where_its_model_is(tmp_path: Path) -> None:
    trainer = Trainer(_config(tmp_path, max_steps=1), _trainer_model(), InMemorySource())
    assert trainer.device == torch.device("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_trainer_on_cuda_matches_the_cpu_trainer(tmp_path: Path) -> None:
    losses = {}
    for device in ("cpu", "cuda"):
        source = InMemorySource()
        trainer = Trainer(_config(tmp_path / device, async_level=1, max_steps=3), _trainer_model().to(device), source)
        trainer.start()
        source.put("a", _batch(0, policy_step=0))
        trainer.train_step()
        source.put("b", _batch(1, policy_step=0))  # from the retained policy: logp_behav recomputed
        metrics = trainer.train_step()
        assert next(trainer.model.parameters()).device.type == device
        losses[device] = (metrics.loss, metrics.logprob_mismatch)
    assert losses["cuda"] == pytest.approx(losses["cpu"], rel=1e-3, abs=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_worker_generates_on_the_gpu() -> None:
    policy = _policy()
    backend = Producer(choose_compute("cuda", "bfloat16")).backend_for(policy)
    assert next(backend.model.parameters()).device.type == "cuda"
    completions = backend.generate([[1, 5, 6]], SPEC.sampling, [3])
    assert completions[0].hidden.dtype == torch.bfloat16 and len(completions[0].token_ids) >= 1
