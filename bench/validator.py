"""How many workers one validator keeps up with at the pool's spot-check fraction:
`python -m bench.validator [--quick] [--spec TOML] [--q Q] [--vocab V] [--max-tokens T]`.

A real anvil (mining on every transaction and at least once a second, as a live chain keeps making
blocks), a real Kubo node and a real policy (the tiny in-code model, or with `--vocab` a Llama-style
Hugging Face checkpoint of that vocabulary from examples/hf_models). N simulated workers each submit
real rollout files (with TOPLOC proofs, for their own address and assignment, each made after the worker's
previous submission: its nonce's step and seed come from the pin that submission set) at the pace one worker
on this machine generates them; the workers make each round of files with the validator held and the
bench's clock stopped, so they do not take its cores. One validator daemon (one checker process) judges
them at the pool's q (the run spec's `spot_check_bps`, default examples/run-spot.toml; `--q` overrides).

Two phases (last line: one JSON object):
- paced: N workers submit their files at one worker's generation pace each — `lost` (submissions without
  a verdict at the end), p50/p99 submission-to-verdict seconds, the backlog, and `paced_keeps_up` (every
  file judged within one generation period after the last submission);
- saturated: each worker submits one more file, all at once; the time to judge them all gives the
  validator's capacity: workers_per_validator = N × one worker's generation seconds per file / that time
  (fetch, decode, every check, the verdict transaction — the daemon as it runs).
Also: verify_cost_fraction = the checker's compute seconds / the generation seconds of the same files;
checked_fraction = completion tokens given the expensive checks / all completion tokens.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit
from deploy.anvil import dev_accounts, start_anvil
from deploy.contracts import deploy_contracts
from deploy.kubo_node import KuboNode
from deploy.pools import PoolConfig, create_pool, spot_check_terms
from examples.hf_models import llama_style
from ledger_client.chain.ledger import Ledger, connect, save_deployment
from ledger_client.chain.queries import get_work, next_binding
from ledger_client.ipfs.content import publish_run_spec, put_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import hex_text
from protocol.pool import WorkStatus
from protocol.rollouts import encode_rollouts
from protocol.runspec import RunSpec, load_run_spec
from protocol.spotcheck import MAX_BPS, min_slash
from protocol.submission import SubmissionBinding
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from trainer.publish import base_checkpoint_digest
from validator.checks import checker_process
from validator.config import DaemonConfig
from validator.daemon import ValidatorDaemon
from validator.outcome import CheckOutcome, Submission
from worker.policy import Policy
from worker.produce import make_batch

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SPEC = ROOT / "examples/run-spot.toml"
TOKENS = 10**18
REWARD_PER_SAMPLE = 10**16


class Clock:
    """Seconds that do not count the rounds in which the simulated workers make their files."""

    def __init__(self) -> None:
        self.paused = 0.0

    def now(self) -> float:
        return time.perf_counter() - self.paused

    @contextlib.contextmanager
    def stopped(self) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.paused += time.perf_counter() - t0


class TimedDaemon(ValidatorDaemon):
    """The validator daemon, noting when (on `clock`) each verdict was sent and what its check measured."""

    def __init__(self, clock: Clock, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.clock = clock
        self.verdict_at: dict[bytes, float] = {}
        self.outcomes: list[CheckOutcome] = []

    def _verdict(self, s: Submission, outcome: CheckOutcome) -> int:
        sent = super()._verdict(s, outcome)
        if sent:
            self.verdict_at[s.work_id] = self.clock.now()
            self.outcomes.append(outcome)
        return sent


def bench_spec(path: Path, q: float | None, max_tokens: int | None) -> RunSpec:
    """The run spec at `path`, with `--q` and `--max-tokens` applied."""
    spec = load_run_spec(path)
    if q is not None:
        verification = spec.verification.model_copy(update={"spot_check_bps": max(1, round(q * MAX_BPS))})
        spec = spec.model_copy(update={"verification": verification})
    if max_tokens is not None:
        spec = spec.model_copy(update={"sampling": spec.sampling.model_copy(update={"max_tokens": max_tokens})})
    return RunSpec.model_validate(spec.model_dump())  # re-validated after the updates


def run(spec: RunSpec, workers: int, files_per_worker: int, vocab: int | None, console: Console,
        checker_threads: int | None = 1) -> dict:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        anvil = start_anvil(tmp / "anvil.log", accounts=workers + 4, extra_args=["--block-time", "1", "--mixed-mining"])
        kubo_node = KuboNode.start(tmp / "kubo", offline=True)
        try:
            return _run(tmp, anvil, kubo_node, spec, workers, files_per_worker, vocab, console, checker_threads)
        finally:
            kubo_node.stop()
            anvil.stop()


def _run(tmp: Path, anvil, kubo_node, spec: RunSpec, n_workers: int, files_per_worker: int, vocab: int | None,
         console: Console, checker_threads: int | None) -> dict:
    w3 = connect(anvil.rpc_url)
    accounts = dev_accounts(n_workers + 4)
    deployment = deploy_contracts(w3, accounts[0])
    deployments = tmp / "deployments.json"
    save_deployment(deployments, deployment)
    kubo = KuboClient(kubo_node.api_multiaddr)
    # no warm start: an untrained policy rarely emits EOS, so completions run to max_tokens
    checkpoint = llama_style(tmp / "hf", vocab=vocab) if vocab else None
    model, tokenizer = init_policy(spec, ModelSpec(hidden=64, layers=2, heads=4), warm_steps=0, warm_lr=0.0,
                                   checkpoint=checkpoint)
    base = base_checkpoint_digest(kubo, model.state_dict(), model.config, tokenizer)
    n_per_file = spec.prompts_per_submission * spec.sampling.group_size
    bps = spec.verification.spot_check_bps
    slash = max(TOKENS, min_slash(bps, REWARD_PER_SAMPLE, n_per_file))
    cfg = PoolConfig(trainer=accounts[1].address, validators=[accounts[2].address], min_stake=slash,
                     reward_per_sample=REWARD_PER_SAMPLE, slash_amount=slash, bounty_bps=0, challenge_window_s=86_400,
                     reward_lock_s=2 * 86_400, async_level=2, task=hex_text(publish_run_spec(kubo, spec)),
                     base_checkpoint=hex_text(base), funding=10**24)
    admin = Ledger(w3, deployment, accounts[0])
    admin.token.mint(accounts[1].address, 10**25)
    pool_id = create_pool(Ledger(w3, deployment, accounts[1]), cfg, spec)  # n and q from the run spec
    worker_ledgers = []
    for acc in accounts[4:]:
        admin.token.mint(acc.address, (files_per_worker + 3) * slash)
        ledger = Ledger(w3, deployment, acc)
        ledger.ensure_allocation(pool_id, (files_per_worker + 2) * slash)  # every file open at once: slash × files
        ledger.pool.join_pool(pool_id)
        worker_ledgers.append(ledger)

    policy = Policy(0, base, model, tokenizer)
    gen = {"s": 0.0, "tokens": 0}

    def make_file(w: int, timed: bool = True) -> tuple[Ledger, SubmissionBinding, bytes, int]:
        """Worker w's next file, made now: its nonce's step and seed come from the chain's pin, which its
        previous submission set (a file made before that submission is mined is WRONG_BINDING)."""
        ledger = worker_ledgers[w]
        binding = next_binding(ledger, pool_id)
        t0 = time.perf_counter()
        batch = make_batch(policy, spec, binding)
        if timed:
            gen["s"] += time.perf_counter() - t0
            gen["tokens"] += sum(len(s.completion_ids) for s in batch.samples)
        data = encode_rollouts(batch)
        put_object(kubo, data)
        return ledger, binding, data, len(batch.samples)

    clock = Clock()
    state = tmp / "validator"
    factory = functools.partial(checker_process, checker_threads, anvil.rpc_url, str(deployments),
                                kubo_node.api_multiaddr, pool_id, state / "cache")
    daemon = TimedDaemon(clock, Ledger(w3, deployment, accounts[2]),
                         DaemonConfig(pool_id=pool_id, state_dir=state, kubo_api=kubo_node.api_multiaddr,
                                      processes=1, max_in_flight=4, poll_interval_s=0.05), factory)
    # Warm the checker process (start, run spec, policy fetch and load) on worker 0's first file.
    _submit(*make_file(0, timed=False))
    while not daemon.verdict_at:
        daemon.run_once()
        time.sleep(0.05)
    daemon.verdict_at.clear()
    daemon.outcomes.clear()

    stop = threading.Event()
    turn = threading.Lock()
    """Held by the validator while it judges and by the workers while they make a round of files (the clock
    stopped): files are made between submissions, as the pin requires, without taking the validator's cores."""
    busy = {"s": 0.0, "judged": 0}

    def validate() -> None:
        while not stop.is_set():
            with turn:
                t0 = time.perf_counter()
                judged = daemon.run_once()
                if judged:
                    busy["s"] += time.perf_counter() - t0
                    busy["judged"] += judged
            if not judged:
                stop.wait(daemon.config.poll_interval_s)

    def make_round() -> list[tuple[Ledger, SubmissionBinding, bytes, int]]:
        with turn, clock.stopped():
            return [make_file(w) for w in range(n_workers)]

    console.print(f"{n_workers} workers × {files_per_worker} files, each made after the worker's previous "
                  f"submission (the clock stopped meanwhile), then {n_workers} more at once…")
    thread = threading.Thread(target=validate, daemon=True)
    thread.start()
    submitted_at: dict[bytes, float] = {}
    backlog_series: list[tuple[float, int]] = []

    def submit(file: tuple[Ledger, SubmissionBinding, bytes, int]) -> None:
        _submit(*file)
        submitted_at[file[1].work_id] = clock.now()

    def drain(start: float) -> None:
        deadline = clock.now() + 600
        while len(daemon.verdict_at) < len(submitted_at) and clock.now() < deadline:
            time.sleep(0.02)
            _sample(backlog_series, start, clock, len(submitted_at), len(daemon.verdict_at))

    round_files = make_round()
    file_gen_s = gen["s"] / n_workers
    console.print(f"paced: {files_per_worker} rounds at one worker's pace ({file_gen_s:.2f}s per file) × {n_workers}")
    start = clock.now()
    for i in range(files_per_worker):
        if i:
            round_files = make_round()
        for w, file in enumerate(round_files):
            at = (i + w / n_workers) * file_gen_s
            while clock.now() - start < at:
                time.sleep(0.005)
                _sample(backlog_series, start, clock, len(submitted_at), len(daemon.verdict_at))
            submit(file)
    submit_window = clock.now() - start
    drain(start)
    paced_total = clock.now() - start
    paced = dict(submitted_at)
    latencies = sorted(daemon.verdict_at[w] - t for w, t in paced.items() if w in daemon.verdict_at)
    paced_busy = dict(busy)

    console.print(f"saturated: {n_workers} files at once")
    burst = make_round()
    burst_start = clock.now()
    for file in burst:
        submit(file)
    drain(start)
    burst_s = max(daemon.verdict_at[w] for w in submitted_at if w not in paced) - burst_start
    stop.set()
    thread.join(60)
    daemon.close()
    statuses = [get_work(worker_ledgers[0], w).status for w in submitted_at]
    verdicts = sum(s != WorkStatus.PENDING for s in statuses)
    outcomes = daemon.outcomes
    file_tokens = sum(o.tokens for o in outcomes)
    paced_busy_per_file = paced_busy["s"] / max(1, paced_busy["judged"])
    check_seconds = sum(o.seconds for o in outcomes)
    terms = spot_check_terms(cfg, spec)
    return {
        "spot_check_bps": bps,
        "checked_per_file": terms["checked_per_file"],
        "detection_probability_1_fabricated": terms["detection_probability_1_fabricated"],
        "vocab": model.config.vocab_size,
        "checker_threads": checker_threads or "torch default",
        "max_tokens": spec.sampling.max_tokens,
        "workers": n_workers,
        "submissions": len(submitted_at),
        "verdicts": verdicts,
        "accepted": sum(s == WorkStatus.ACCEPTED for s in statuses),
        "challenged": dict(Counter(o.reason.name for o in outcomes if not o.ok)),  # every file is honest
        "lost": len(submitted_at) - verdicts,
        "gen_s_per_file": round(file_gen_s, 3),
        "worker_gen_tokens_per_s": round(gen["tokens"] / gen["s"], 1),
        "paced_submit_window_s": round(submit_window, 1),
        "paced_total_s": round(paced_total, 1),
        "paced_max_backlog": max((b for t, b in backlog_series if t <= paced_total), default=0),
        "paced_keeps_up": paced_total - submit_window < file_gen_s,
        "p50_verdict_s": round(_quantile(latencies, 0.50), 2),
        "p99_verdict_s": round(_quantile(latencies, 0.99), 2),
        "paced_busy_s_per_file": round(paced_busy_per_file, 4),
        "saturated_s_per_file": round(burst_s / n_workers, 4),
        "check_s_per_file": round(check_seconds / max(1, len(outcomes)), 4),
        "checked_fraction": round(sum(o.checked_tokens for o in outcomes) / max(1, file_tokens), 4),
        "verify_cost_fraction": round(check_seconds / (file_gen_s * max(1, len(outcomes))), 4),
        "workers_per_validator": round(file_gen_s * n_workers / burst_s, 1),
        "backlog": [(round(t, 1), b) for t, b in backlog_series[:: max(1, len(backlog_series) // 20)]],
    }


def _submit(ledger: Ledger, binding: SubmissionBinding, data: bytes, n_samples: int) -> None:
    """A simulated worker's submitWork at its pinned step, sent from anvil's unlocked account (one RPC, no signing
    or receipt polling), so that the simulated workers take as little as possible of the validator's two cores."""
    call = ledger.pool.contract.functions.submitWork(binding.pool_id, binding.step, binding.nonce,
                                                     hashlib.sha256(data).digest(), n_samples)
    call.transact({"from": ledger.address, "gas": 200_000})


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[min(98, max(0, round(q * 100) - 1))]


def _sample(series: list, start: float, clock: Clock, submitted: int, judged: int) -> None:
    now = clock.now() - start
    if not series or now - series[-1][0] >= 1.0:
        series.append((now, submitted - judged))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="24 workers, 1 file each (the CI-sized run)")
    p.add_argument("--workers", type=int)
    p.add_argument("--files-per-worker", type=int)
    p.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="run spec TOML (default: examples/run-spot.toml)")
    p.add_argument("--q", type=float, help="spot-check fraction in (0, 1] (default: the spec's spot_check_bps)")
    p.add_argument("--vocab", type=int, help="use a Llama-style HF checkpoint of this vocabulary (examples/hf_models)")
    p.add_argument("--max-tokens", type=int, help="completion token limit (default: the spec's)")
    p.add_argument("--threads", type=int, default=1, help="torch threads of the checker process (0: torch's default)")
    add_record_option(p)
    args = p.parse_args()
    if args.q is not None and not 0 < args.q <= 1:
        p.error("--q must be in (0, 1]")
    spec = bench_spec(args.spec, args.q, args.max_tokens)
    workers = args.workers or (24 if args.quick else 40)
    files = args.files_per_worker or (1 if args.quick else 3)
    console = Console()
    result = run(spec, workers, files, args.vocab, console, args.threads or None)
    table = Table(title=f"one validator vs N workers (CPU, q = {result['spot_check_bps'] / MAX_BPS:g})",
                  show_header=False)
    for k, v in result.items():
        if k != "backlog":
            table.add_row(k, str(v))
    table.add_row("backlog over time (s, files)", " ".join(f"{t}:{b}" for t, b in result["backlog"]))
    console.print(table)
    emit({k: v for k, v in result.items() if k != "backlog"}, args, "validator")


if __name__ == "__main__":
    exit_on_signals()
    main()
