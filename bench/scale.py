"""`python -m bench.scale [--quick]`: issue 46's load benchmark — what each off-chain part costs with a pool of many
workers and a long history, every figure in one JSON line.

Live (real parts): real contracts on anvil with 2 s blocks, a real Kubo node, a pool judged by one real validator
daemon (validator/daemon.py, its checks in a checker process) and a real trainer intake (trainer/ledger_source.py's
`LedgerSource` over the chain and Kubo, its consumed log on disk, polled every 0.5 s), and `--workers` real worker daemons
(worker/daemon.py) in this process, each on its own connection, generating honest files with a tiny real torch policy
(the e2e tests' sort task: 2 prompts × 4 completions × ≤ 8 tokens a file) under its own nonces and pins. Each worker
makes `--files-per-worker` files for step 0 (no trainer publishes a new one); then the pool is left idle for
`--idle-s`. Every JSON-RPC request of every role is counted at its transport (bench.worker_rpc's `counted`), by
method and each `eth_call` and `eth_estimateGas` by its contract function, with the block range of each `eth_getLogs`
(`details.live`: `rpc_busy_by_function`, and the workers' requests a file by method and function,
`rpc_per_file_by_request`, printed before the table). With `--gap-blocks` G, G empty blocks are mined between the pool's creation
and the roles' start, so that each role's first reads walk a history longer than a log page.

- `files_per_s_accepted`: files the trainer's intake took (accepted by the validator, fetched and decoded; the intake
  consumes at the accepting verdict, as `trainer start --no-wait-final` does, so that the pool's challenge window is
  not in the figure) over the seconds from the workers' start to the last one taken (bounded here by generation in
  one process and by a worker's submission a block: a floor, not the chain's or the validator's capacity);
- `rpc_per_file`: the workers' requests over that span / files submitted; `rpc_per_worker_s`: a worker's requests a
  second in the idle span that follows (its files made, the step's policy held, its rewards unlocking meanwhile);
- `validator_cpu_per_file_ms`: the validator's CPU over the files it judged (its daemon thread, its fetch threads
  and its checker process, from the checker's start);
- `max_logs_range_blocks`: the largest `eth_getLogs` range any client may ask (the page limit every role's `Ledger`
  was built with, `--logs-page-blocks`' default), or the largest one watched if that were larger — the watched
  maximum, count and the gap are under `scale`.

Synthetic history, through the components' own code (each bench's own function, called here):
- `trainer_ms_per_event_10m`, `trainer_state_mb_per_step_10m`: bench.intake's `measure` (the real `LedgerSource.poll`
  over a real consumed log of `--consumed` ids, default 10 M);
- `explorer_p99_ms_1m`: bench.explorer_scale's `run` (the real indexer's writes, the app's every route; default
  1,000,000 files, `--quick` 100,000);
- `pacing_overproduction_1000`, `_10000`: bench.pacing's `simulate_pool` (the real `Pacer` and `DemandEstimate`;
  2 % of the workers replaced each step): files made over what the notes asked.

Each key's scale is under `scale` (a key named `_10m` or `_1m` says the issue's scale; `scale` says the run's);
`done_when` compares each key the issue bounds with its bound. `--quick` (about 6 minutes on 2 cores): 8 workers,
no gap, the explorer at 100,000 files, the intake at 10 M. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import psutil
import torch

from bench import explorer_scale, intake
from bench.cleanup import exit_on_signals
from bench.pacing import simulate_pool
from bench.report import add_record_option, print_rows
from bench.worker_rpc import counted
from deploy.anvil import dev_accounts, start_anvil
from deploy.contracts import deploy_contracts
from deploy.kubo_node import KuboNode
from deploy.pools import PoolConfig, create_pool
from inference.policy import PolicyLoader
from ledger_client.chain.ledger import Ledger, connect, save_deployment
from ledger_client.ipfs.content import publish_run_spec
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import hex_text
from inference.tiny import TINY_SORT_SPEC as SPEC
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from trainer.ledger_source import LedgerSource
from trainer.publish import base_checkpoint_digest
from validator.checks import RolloutChecker
from validator.config import DaemonConfig
from validator.daemon import ValidatorDaemon
from worker.daemon import WorkerDaemon, WorkerOptions
from worker.produce import produce_rollout_file

TOKENS = 10**18
BLOCK_S = 2
WINDOW_S = 600
"""The pool's challenge window: longer than the validator's verdict margin (30 s) with room for a loaded machine."""
MINE_AT_ONCE = 100
"""Empty blocks one `anvil_mine` makes (thousands at once outlast a loaded machine's request timeout)."""
TRAINER_POLL_S = 0.5
BUSY_LIMIT_S = 300.0
"""The longest the workers' span may last; files without a verdict by then count as lost."""
PACING_CHURN = 0.02
BOUNDS = {"rpc_per_worker_s": 1, "max_logs_range_blocks": 10_000, "trainer_ms_per_event_10m": 1,
          "explorer_p99_ms_1m": 100, "pacing_overproduction_1000": 1.5, "pacing_overproduction_10000": 1.5}
"""Issue 46's "Done when": each key at most this."""


@dataclass(frozen=True)
class Scale:
    workers: int = 32
    files_per_worker: int = 4
    idle_s: float = 60.0
    gap_blocks: int = 12_000
    consumed: int = 10_000_000
    intake_steps: int = 20
    explorer_files: int = 1_000_000
    explorer_workers: int = 1_000
    explorer_reps: int = 20
    pacing_steps: int = 40


FULL = Scale()
QUICK = Scale(workers=8, files_per_worker=3, idle_s=30.0, gap_blocks=0, intake_steps=10, explorer_files=100_000,
              explorer_reps=5)


def pacing(steps: int) -> dict:
    out = {}
    for workers in (1_000, 10_000):
        over_asked, over_trained = simulate_pool(workers, steps=steps, churn=PACING_CHURN, seed=workers)
        out[f"pacing_overproduction_{workers}"] = round(over_asked, 3)
        out[f"pacing_over_trained_{workers}"] = round(over_trained, 3)
    return out


def trainer(consumed: int, steps: int, folder: Path) -> dict:
    return intake.measure(consumed, 32, steps, folder)


def explorer(files: int, workers: int, reps: int, folder: Path) -> dict:
    return explorer_scale.run(files, workers, reps, folder / "index.db")


def _cpu_s(thread: threading.Thread) -> float:
    """CPU seconds a live thread of this process has used."""
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def live(scale: Scale, folder: Path) -> dict:
    torch.set_num_threads(1)
    anvil = start_anvil(folder / "anvil.log", accounts=scale.workers + 4)
    try:
        kubo_node = KuboNode.start(folder / "kubo", offline=True)
        try:
            return _live(scale, folder, anvil, kubo_node)
        finally:
            kubo_node.stop()
    finally:
        anvil.stop()


def _live(scale: Scale, folder: Path, anvil, kubo_node) -> dict:
    w3 = connect(anvil.rpc_url, 31337)
    accounts = dev_accounts(scale.workers + 4)
    deployment = deploy_contracts(w3, accounts[0])
    deployments = folder / "deployments.json"
    save_deployment(deployments, deployment)
    kubo_api = kubo_node.api_multiaddr
    kubo = KuboClient(kubo_api)
    model, tokenizer = init_policy(SPEC, ModelSpec(hidden=32, layers=1, heads=2), warm_steps=0, warm_lr=0.0)
    base = base_checkpoint_digest(kubo, model.state_dict(), model.config, tokenizer)
    admin = Ledger(w3, deployment, accounts[0])
    for account in accounts[1:2] + accounts[4:]:
        admin.token.mint(account.address, 10**25)
    cfg = PoolConfig(trainer=accounts[2].address, validators=[accounts[3].address], min_stake=100 * TOKENS,
                     reward_per_sample=TOKENS, slash_amount=50 * TOKENS, bounty_bps=2_000, challenge_window_s=WINDOW_S,
                     reward_lock_s=2 * WINDOW_S, async_level=2, task=hex_text(publish_run_spec(kubo, SPEC)),
                     base_checkpoint=hex_text(base), funding=10**24)
    pool_id = create_pool(Ledger(w3, deployment, accounts[1]), cfg, SPEC)
    for _ in range(scale.gap_blocks // MINE_AT_ONCE):  # the roles start a long history after the pool's creation
        w3.provider.make_request("anvil_mine", [MINE_AT_ONCE])

    counts: dict[str, Counter] = {}
    calls: dict[str, Counter] = {}
    log_ranges: list[int] = []

    def ledger_of(role: str, account) -> Ledger:
        role_w3 = connect(anvil.rpc_url, 31337)
        counted(role_w3, counts.setdefault(role, Counter()), log_ranges, calls.setdefault(role, Counter()))
        return Ledger(role_w3, deployment, account)

    ledgers = [ledger_of(f"worker{i}", account) for i, account in enumerate(accounts[4:])]
    workers = [WorkerDaemon(ledger, WorkerOptions(pool_id=pool_id, kubo_api=kubo_api, work_dir=folder / f"worker{i}",
                                                  submissions_per_step=scale.files_per_worker),
                            produce_rollout_file, PolicyLoader()) for i, ledger in enumerate(ledgers)]
    for daemon in workers:
        daemon.prepare()  # stake and join, mined at once (the pool's set-up, not its running cost)
    w3.provider.make_request("evm_setIntervalMining", [BLOCK_S])  # 2 s blocks from here on
    state = folder / "validator"
    validator = ValidatorDaemon(ledger_of("validator", accounts[3]),
                                DaemonConfig(pool_id=pool_id, state_dir=state, kubo_api=kubo_api),
                                functools.partial(RolloutChecker, anvil.rpc_url, str(deployments), kubo_api, pool_id,
                                                  state / "cache"))
    source = LedgerSource(ledger_of("trainer", accounts[2]), KuboClient(kubo_api), pool_id, wait_final=False,
                          consumed_log=folder / "consumed.log")  # `trainer start --no-wait-final`: at acceptance
    try:
        return _run_pool(scale, w3, deployment, accounts, workers, validator, source, counts, calls, log_ranges,
                         ledgers)
    finally:
        validator.close()
        source.close()
        for daemon in workers:
            daemon.lock.release()


def _run_pool(scale: Scale, w3, deployment, accounts, workers: list[WorkerDaemon], validator: ValidatorDaemon,
              source: LedgerSource, counts: dict[str, Counter], calls: dict[str, Counter], log_ranges: list[int],
              ledgers: list[Ledger]) -> dict:
    validator.checkers.start()
    checkers = [psutil.Process(slot.process.pid) for slot in validator.checkers._slots]
    checker_cpu0 = sum(sum(p.cpu_times()[:2]) for p in checkers)
    for c in (*counts.values(), *calls.values()):
        c.clear()  # the roles' start-up reads (the gap's pages among them) stay in log_ranges
    consumed = Counter()
    stop_roles, stop_workers = threading.Event(), threading.Event()

    def intake_loop() -> None:
        while not stop_roles.is_set():
            consumed["files"] += len(source.poll())
            stop_roles.wait(TRAINER_POLL_S)

    validator_thread = threading.Thread(target=validator.run, args=(stop_roles,), name="validator", daemon=True)
    trainer_thread = threading.Thread(target=intake_loop, name="trainer", daemon=True)
    worker_threads = [threading.Thread(target=d.run, args=(stop_workers,), name=f"worker{i}", daemon=True)
                      for i, d in enumerate(workers)]
    validator_thread.start()
    trainer_thread.start()
    observer = Ledger(w3, deployment, accounts[0])  # the bench's own reads: not counted
    first_block = w3.eth.block_number
    started = time.monotonic()
    for thread in worker_threads:
        thread.start()
    files = scale.workers * scale.files_per_worker
    accepted = challenged = 0
    while time.monotonic() - started < BUSY_LIMIT_S:
        time.sleep(1.0)
        events = observer.pool.contract.events
        accepted = len(events.WorkAccepted.get_logs(from_block=first_block))
        challenged = len(events.WorkChallenged.get_logs(from_block=first_block))
        if consumed["files"] + challenged >= files:
            break
    busy_s = time.monotonic() - started
    submitted = sum(d.stats.submitted for d in workers)
    busy = {role: sum(c.values()) for role, c in counts.items()}
    busy_methods, busy_calls = _methods(counts), _methods(calls)
    fetchers = list(validator._fetchers._threads)
    validator_cpu = _cpu_s(validator_thread) + sum(_cpu_s(t) for t in fetchers if t.is_alive()) + \
        sum(sum(p.cpu_times()[:2]) for p in checkers) - checker_cpu0
    for c in (*counts.values(), *calls.values()):
        c.clear()
    idle_started = time.monotonic()
    stop_workers.wait(scale.idle_s)
    idle_s = time.monotonic() - idle_started
    idle = {role: sum(c.values()) for role, c in counts.items()}
    idle_methods, idle_calls = _methods(counts), _methods(calls)
    stop_workers.set()
    stop_roles.set()
    for thread in (*worker_threads, validator_thread, trainer_thread):
        thread.join(timeout=30)
    worker_busy = sum(n for role, n in busy.items() if role.startswith("worker"))
    worker_idle = sum(n for role, n in idle.items() if role.startswith("worker"))
    limit = max(ledger.logs.page_blocks for ledger in [*ledgers, validator.ledger, source.ledger])
    observed = max(log_ranges, default=0)
    return {
        "workers": scale.workers,
        "files_per_s_accepted": round(consumed["files"] / busy_s, 3),
        "rpc_per_file": round(worker_busy / max(1, submitted), 2),
        "rpc_per_worker_s": round(worker_idle / (scale.workers * idle_s), 3),
        "validator_cpu_per_file_ms": round(1e3 * validator_cpu / max(1, accepted + challenged), 1),
        "max_logs_range_blocks": max(limit, observed),
        "live": {"files": files, "submitted": submitted, "accepted": accepted, "challenged": challenged,
                 "lost": files - accepted - challenged, "busy_s": round(busy_s, 1), "idle_s": round(idle_s, 1),
                 "blocks": w3.eth.block_number - first_block, "trainer_consumed": consumed["files"],
                 "rpc_busy_by_role": _by_role(busy), "rpc_idle_per_s_by_role": {
                     role: round(n / idle_s, 3) for role, n in _by_role(idle).items()},
                 "rpc_busy_by_method": busy_methods, "rpc_idle_by_method": idle_methods,
                 "rpc_busy_by_function": busy_calls, "rpc_idle_by_function": idle_calls,
                 "rpc_per_file_by_request": _per_file(busy_methods.get("workers", {}), busy_calls.get("workers", {}),
                                                      submitted),
                 "logs_page_limit": limit, "logs_range_observed_max": observed, "logs_requests": len(log_ranges)},
    }


def _methods(counts: dict[str, Counter]) -> dict[str, dict[str, int]]:
    """Requests by method: the workers' summed under `workers`, the other roles' as they are."""
    out: dict[str, Counter] = {}
    for role, c in counts.items():
        out.setdefault("workers" if role.startswith("worker") else role, Counter()).update(c)
    return {role: dict(c) for role, c in out.items()}


def _per_file(methods: dict[str, int], functions: dict[str, int], files: int) -> dict[str, float]:
    """The workers' requests a file by method, each `eth_call` and `eth_estimateGas` by the function it calls, most
    first."""
    split = {m: n for m, n in methods.items() if m not in ("eth_call", "eth_estimateGas")} | functions
    return {k: round(n / max(1, files), 2) for k, n in sorted(split.items(), key=lambda kv: (-kv[1], kv[0]))}


def _by_role(totals: dict[str, int]) -> dict[str, int]:
    """The workers' counts summed under `workers`, the other roles as they are."""
    out = {role: n for role, n in totals.items() if not role.startswith("worker")}
    out["workers"] = sum(n for role, n in totals.items() if role.startswith("worker"))
    return out


def measure(scale: Scale, folder: Path, say=lambda line: None) -> dict:
    """Every part (module docstring), then the figures: the keys, `scale`, `done_when` and each part's details."""
    say(f"pacing: {scale.pacing_steps} steps of 1,000 and 10,000 simulated workers")
    paced = pacing(scale.pacing_steps)
    say(f"trainer intake: {scale.consumed:,} files consumed before")
    taken = trainer(scale.consumed, scale.intake_steps, folder)
    say(f"explorer: {scale.explorer_files:,} files by {scale.explorer_workers:,} workers")
    explored = explorer(scale.explorer_files, scale.explorer_workers, scale.explorer_reps, folder)
    say(f"live pool: {scale.workers} workers × {scale.files_per_worker} files on anvil with {BLOCK_S} s blocks, "
        f"a gap of {scale.gap_blocks:,} blocks")
    pool = live(scale, folder)
    run = pool.pop("live")
    result = {
        **pool,
        "trainer_ms_per_event_10m": taken["trainer_ms_per_event"],
        "trainer_state_mb_per_step_10m": taken["trainer_state_mb_per_step"],
        "explorer_p99_ms_1m": explored["explorer_p99_ms_1m"],
        "pacing_overproduction_1000": paced["pacing_overproduction_1000"],
        "pacing_overproduction_10000": paced["pacing_overproduction_10000"],
    }
    live_scale = {"workers": scale.workers, "files": run["files"], "block_s": BLOCK_S,
                  "file": "2 prompts × 4 completions × ≤ 8 tokens, tiny torch policy"}
    result["scale"] = {
        "files_per_s_accepted": live_scale, "rpc_per_file": live_scale, "validator_cpu_per_file_ms": live_scale,
        "rpc_per_worker_s": {"workers": scale.workers, "idle_s": run["idle_s"], "block_s": BLOCK_S},
        "max_logs_range_blocks": {"page_limit": run["logs_page_limit"], "observed_max": run["logs_range_observed_max"],
                                  "requests": run["logs_requests"], "gap_blocks": scale.gap_blocks},
        "trainer_ms_per_event_10m": {"consumed": taken["consumed"], "files_per_step": taken["files_per_step"],
                                     "steps": taken["steps"], "statistic": "median over steps"},
        "trainer_state_mb_per_step_10m": {"consumed": taken["consumed"], "statistic": "worst step"},
        "explorer_p99_ms_1m": {"files": explored["files"], "workers": explored["workers"], "reps": scale.explorer_reps,
                               "worst_route": explored["worst_route"]},
        "pacing_overproduction_1000": {"workers": 1_000, "steps": scale.pacing_steps, "churn": PACING_CHURN},
        "pacing_overproduction_10000": {"workers": 10_000, "steps": scale.pacing_steps, "churn": PACING_CHURN},
    }
    result["done_when"] = {key: result[key] <= bound for key, bound in BOUNDS.items()}
    result["details"] = {
        "live": run, "pacing": paced,
        "trainer": {k: taken[k] for k in ("trainer_ms_per_event_max", "trainer_cpu_ms_per_event_max", "load_s",
                                          "log_mb", "peak_rss_mb")},
        "explorer": {k: explored[k] for k in ("events", "insert_s", "db_mb")},
    }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the 2-core, 10-minute run (module docstring)")
    for name, help_ in (("workers", "worker daemons of the live pool"), ("files-per-worker", "files each makes"),
                        ("idle-s", "seconds the pool is left idle after"),
                        ("gap-blocks", "empty blocks mined before the roles start"),
                        ("consumed", "files the trainer's intake consumed before"),
                        ("explorer-files", "files in the explorer's history"),
                        ("explorer-reps", "answers timed per explorer route"),
                        ("pacing-steps", "steps of the pacing simulation")):
        kind = float if name == "idle-s" else int
        parser.add_argument(f"--{name}", type=kind, help=f"{help_} (default: the full run's, or --quick's)")
    add_record_option(parser)
    args = parser.parse_args(argv)
    overrides = {f: getattr(args, f) for f in asdict(FULL) if f in vars(args) and getattr(args, f) is not None}
    if any(v < (0 if k == "gap_blocks" else 1) for k, v in overrides.items()):
        print("error: every count must be at least 1 (--gap-blocks at least 0)", file=sys.stderr)
        return 2
    scale = replace(QUICK if args.quick else FULL, **overrides)
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        result = measure(scale, Path(tmp), say=lambda line: print(line, file=sys.stderr, flush=True))
    rows = [(key, f"{result[key]}" + ("" if key not in BOUNDS else f"  (≤ {BOUNDS[key]:,}: "
                                                                     f"{'yes' if result['done_when'][key] else 'NO'})"))
            for key in ("workers", "files_per_s_accepted", "rpc_per_worker_s", "rpc_per_file", "max_logs_range_blocks",
                        "trainer_ms_per_event_10m", "trainer_state_mb_per_step_10m", "explorer_p99_ms_1m",
                        "pacing_overproduction_1000", "pacing_overproduction_10000", "validator_cpu_per_file_ms")]
    print("the workers' requests a file, by method and function:", file=sys.stderr)
    for request, n in result["details"]["live"]["rpc_per_file_by_request"].items():
        print(f"  {request:<48} {n:>7}", file=sys.stderr)
    print_rows(rows, result, args, "scale")
    return 0


if __name__ == "__main__":
    exit_on_signals()
    sys.exit(main())
