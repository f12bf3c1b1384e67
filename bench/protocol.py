"""`python -m bench.protocol [--quick]`: the price of verified RL — one recipe locally and through the protocol.

The recipe is examples/cpu_run.py's `CpuRecipe` (3-digit sort, the ~1 M-parameter char Llama, its 25-step
supervised warm start, G = 16, 8 prompts a file, batch 128, lr 2.5e-4, seed 0), run one variant after another on
the same `--cores` (the bench pins itself and so every process it starts):

  local        `trainer local`'s best mode (bench.async: async_level 2, this process trains, `--workers`
               `worker.local_cli` processes generate; they meet in a run folder): `examples.cpu_run.run_async`;
  protocol_q5  a fresh devnet (anvil + Kubo + contracts, `deploy.devnet.up` in a temporary folder); `trainer init`
               publishes the same warm-started policy and the recipe's run spec; a new pool judged by the
               ValidatorCourt with the demo's court parameters (examples.demo.DEMO_COURT: verdicts final only after
               its dispute window); `--validators` honest `validator start` processes (audit rate `--audit-rate`),
               `trainer start` (final verdicts only: its default) and `--workers` `worker start` processes, every
               role a process meeting the others only through the chain and IPFS; no adversary;
  protocol_q1  the same with q = 1.

q is the pool's spot-check fraction (run spec `verification.spot_check_bps`, the pool's on-chain `spotCheckBps`):
of each file's n = 128 completions the validator gives m = ceil(q·n) the expensive checks (prefill, TOPLOC,
sampling replay, termination; protocol.spotcheck) — at q = 5 % m = 7, at q = 1 all 128. The cheap checks
(schema, binding, assignment, rewards, seeds) run on every completion at any q.

Clocks: time to target = held-out greedy accuracy (mean of the latest 3 evaluations every 5 steps, on 200
problems: examples.cpu_run.TargetTracker, as bench.async) reaching `--target`, minus the time spent evaluating.
The local clock starts once policy 0 is published (its worker already started); the protocol clock starts when
the trainer and worker processes are launched (after devnet, `trainer init`, pool creation and the validators'
registration with the court becoming active), so it counts their start-up.
A variant that misses the target within its budget reports the budget as a lower bound and its accuracy.

Where the protocol's time goes: every role runs with `PROOFSWARM_PHASE_LOG` set (protocol/phases.py), and the
bench sums each role's phases over the run — generate, prove, encode/upload, submit, wait for a block (a
transaction's receipt), fetch, check, verdict, finalize, train, checkpoint, publish, fetch weights, poll for work
(the trainer's intake besides fetching), eval (off the clock) — and calls the rest of the role's wall time idle
(waiting: for verdicts, finality, a checkpoint, or a chain poll not instrumented). The validator's fetches run
in threads and its checks in checker processes, so its phases may overlap. Per file, from the chain's blocks:
submitted → first verdict → final (WorkAccepted), i.e. the wait for finality. CPU seconds per process (roles
with their children, anvil, Kubo) come from psutil.

Repeats (`--repeats N`): the variants run N times in turn (local, then the protocol on a fresh devnet), and the
figures are medians. One run's steps to the target vary ~3× between runs of the same seed (the asynchronous
pipeline's timing decides which policy made which file), so one run's ratio is mostly that noise; seconds per
trainer step vary much less and are reported too (`*_s_per_step`, `ratio_per_step_*`).

Prints each variant's figures and breakdown; the last line is one JSON object (`local_s`, `protocol_q5_s`,
`protocol_q1_s`, `ratio_q5`, `ratio_q1`, `breakdown`, …; a `*_s` of null with `*_min_s` set: target missed; with
repeats the medians, each run's figures under `runs`, the breakdown of the first run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

import psutil

from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit
from cli.errors import EXIT_USAGE
from deploy import devnet
from deploy.pools import PoolConfig, create_pool
from examples.cpu_run import CpuRecipe, TargetTracker, percentile, run_async
from examples.demo import DEMO_COURT, FETCH_TIMEOUT_S, VERDICT_MARGIN_S, Roles, await_validators, fund_validators, run_json
from ledger_client.chain.keys import KEY_ENV, load_account
from ledger_client.chain.ledger import RPC_LOG_ENV, Ledger
from ledger_client.ipfs.content import fetch_run_spec
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import Digest, hex_text
from protocol.phases import LOG_ENV, ROLE_ENV, read_phases
from protocol.spotcheck import MAX_BPS
from worker.options import DEFAULT_MAX_PENDING

ROOT = Path(__file__).resolve().parent.parent
TOKENS = 10**18
BENCH_MAX_PENDING = 8
"""One worker and one validator at q = 5 % keep pace with 8 files in flight (worker start's default of 2 halves the
worker's file rate here: docs/notes/protocol-price.md)."""
BACKGROUND_FETCH = "prefetch weights (background)"
"""The worker's prefetch thread: it overlaps the role's other phases, so it is not subtracted from idle."""
CATEGORIES = {
    "generate": "generate", "prove": "prove", "encode": "encode/upload", "upload": "encode/upload",
    "tx submitWork": "submit", "block": "wait for a block", "fetch": "fetch", "check": "check",
    "tx attest": "verdict", "tx challenge": "verdict", "tx finalize": "finalize", "train": "train",
    "checkpoint": "checkpoint", "publish": "publish", "tx publishCheckpoint": "publish", "load weights": "fetch weights",
    "prefetch weights": BACKGROUND_FETCH,
    "fetch weights": "fetch weights", "intake": "poll for work", "eval": "eval (off the clock)",
}
"""Phase names in the code (protocol.phases) → the breakdown's rows; other transactions are "other tx"."""
MAX_OVERRUN_S = 600
"""How long a run may go on past its budget waiting for `run_protocol`'s `min_verdicts`."""


@dataclass
class VariantResult:
    """One variant's figures: time to target (None: missed), the accuracy reached and where the time went."""

    name: str
    time_to_target_s: float | None
    budget_s: float
    accuracy_end: float
    steps: int
    breakdown: dict[str, dict[str, float]] = field(default_factory=dict)
    details: dict = field(default_factory=dict)


def run_spec_toml(spec: CpuRecipe, spot_check_bps: int) -> str:
    """The pool's run spec for the recipe: its task, sampling, prompts per file and pool seed, the float32
    CPU verification thresholds of examples/run.toml, and q = spot_check_bps / 10000."""
    task = spec.task
    params = ", ".join(f"{k} = {json.dumps(v)}" for k, v in task.params.items())
    s = spec.sampling
    return (f'prompts_per_submission = {spec.prompts_per_file}\npool_seed = "{hex_text(spec.pool_seed)}"\n\n'
            f'[task]\nname = "{task.name}"\nseed = {task.seed}\nparams = {{ {params} }}\n\n'
            f"[sampling]\ngroup_size = {s.group_size}\ntemperature = {s.temperature}\nmax_tokens = {s.max_tokens}\n\n"
            "[verification]\ntoploc_min_exp_matches = 125\ntoploc_max_mant_err_mean = 0.03\n"
            "toploc_max_mant_err_median = 0.0\ntoploc_mean_excludes_max = true\nlogit_tolerance = 1e-3\n"
            f"spot_check_bps = {spot_check_bps}\n")


def role_breakdown(records: list[dict], walls: dict[str, float], launched_at: float | None = None) -> dict:
    """Seconds per breakdown row for each role of `walls` (role → its wall seconds); `idle` is the wall time
    no phase accounts for (start-up too, when `launched_at` is given: until the role's first phase)."""
    out: dict[str, dict[str, float]] = {}
    for role, wall in walls.items():
        mine = [r for r in records if r["role"] == role]
        rows: dict[str, float] = defaultdict(float)
        for r in mine:
            rows[CATEGORIES.get(r["phase"], "other tx" if r["phase"].startswith("tx ") else r["phase"])] += r["s"]
        if launched_at is not None and mine:
            rows["start-up"] = max(0.0, min(r["t"] for r in mine) - launched_at)
        rows["idle"] = max(0.0, wall - sum(v for k, v in rows.items() if k != BACKGROUND_FETCH))
        out[role] = {k: round(v, 2) for k, v in sorted(rows.items(), key=lambda kv: -kv[1])}
    return out


def time_to_target(records: list[dict], accuracies: list[tuple[int, float]], spec: CpuRecipe,
                   launched_at: float) -> float | None:
    """Seconds from `launched_at` to the evaluation at which the target is reached, minus every evaluation
    before it. `accuracies` are the trainer's (step, accuracy) lines in order, step 0 first; its phase log's
    `eval` records are those evaluations, in the same order."""
    evals = sorted((r for r in records if r["role"] == "trainer" and r["phase"] == "eval"), key=lambda r: r["t"])
    tracker = TargetTracker(spec.target, spec.target_window)
    for i, (step, accuracy) in enumerate(accuracies):
        if step == 0 or i >= len(evals):
            continue
        if tracker.reached(accuracy):
            return round(evals[i]["t"] - launched_at - sum(r["s"] for r in evals[:i]), 2)
    return None


def _accuracies(run_dir: Path) -> list[tuple[int, float]]:
    try:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    except OSError:
        return []
    rows = [json.loads(line) for line in lines if '"accuracy"' in line]
    return [(r["step"], r["accuracy"]) for r in rows]


def run_local(spec: CpuRecipe, root: Path, workers: int) -> VariantResult:
    """`trainer local`'s best mode (async_level 2) on the recipe, with the phase log on."""
    log = root / "local-phases.jsonl"
    os.environ[LOG_ENV] = str(log)  # the worker processes inherit it; each role is named by its pid
    try:
        result = run_async(spec, root / "local", async_level=2, workers=workers, log=True)
    finally:
        del os.environ[LOG_ENV]
    records = read_phases(log)
    trainer = str(os.getpid())
    wall = result.rl_s + result.eval_s
    workers_seen = sorted({r["role"] for r in records} - {trainer})
    breakdown = role_breakdown(records, {role: wall for role in [trainer, *workers_seen]})
    names = {trainer: "trainer"} | {role: f"worker{i}" for i, role in enumerate(workers_seen)}
    named = {names[role]: rows for role, rows in breakdown.items()}
    return VariantResult("local", result.time_to_target_s, spec.budget_s, result.accuracy_end, result.steps, named,
                         {"rl_s": result.rl_s, "eval_s": result.eval_s, "steps_to_target": result.steps_to_target,
                          "staleness_p50_p99": [result.staleness_p50, result.staleness_p99],
                          "files_consumed": result.files_consumed})


class Devnet:
    """A devnet in a temporary folder, stopped on exit."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir

    def __enter__(self) -> dict:
        info, _ = devnet.up(self.state_dir)
        return info

    def __exit__(self, *exc: object) -> None:
        devnet.down(self.state_dir)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its live children (0 when it is gone)."""
    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            continue
    return total


def _chain_latencies(ledger: Ledger, pool_id: int, start_block: int) -> dict:
    """Per submission, from block timestamps: submitted → first verdict → final (WorkAccepted); p50 and mean."""
    mine = lambda events: {bytes(e["args"]["workId"]): e["blockNumber"] for e in events  # noqa: E731
                           if e["args"].get("poolId", pool_id) == pool_id}
    pool, court = ledger.pool.contract.events, ledger.court.contract.events
    submitted = mine(pool.WorkSubmitted.get_logs(from_block=start_block))
    verdict = mine(court.VerdictGiven.get_logs(from_block=start_block))
    final = mine(pool.WorkAccepted.get_logs(from_block=start_block))
    stamps: dict[int, int] = {}

    def at(block: int) -> int:
        if block not in stamps:
            stamps[block] = ledger.w3.eth.get_block(block)["timestamp"]
        return stamps[block]

    def summary(pairs: list[tuple[int, int]]) -> dict:
        gaps = [at(b) - at(a) for a, b in pairs]
        return {"p50": statistics.median(gaps) if gaps else None,
                "mean": round(statistics.fmean(gaps), 2) if gaps else None, "n": len(gaps)}

    return {"submitted": len(submitted), "verdicts": len(verdict), "final_accepted": len(final),
            "submit_to_verdict_s": summary([(submitted[w], verdict[w]) for w in verdict if w in submitted]),
            "verdict_to_final_s": summary([(verdict[w], final[w]) for w in final if w in verdict]),
            "submit_to_final_s": summary([(submitted[w], final[w]) for w in final if w in submitted])}


def run_protocol(spec: CpuRecipe, root: Path, info: dict, state_dir: Path, q_bps: int, workers: int,
                 validators: int, audit_rate: float, max_pending: int = DEFAULT_MAX_PENDING,
                 min_verdicts: int = 0, rpc_census: bool = False, pace: bool = True) -> VariantResult:
    """The recipe through the protocol on the devnet `info` at q = q_bps / 10000 (module docstring). `min_verdicts`:
    the run goes on past its budget until the validators sent that many verdicts (a short run on a loaded machine
    may otherwise stop before its first file is judged), for at most MAX_OVERRUN_S more. `rpc_census`: count every
    role's JSON-RPC requests by method (details["rpc_per_file"], per submitted file). `pace`: False starts the
    workers with --no-pace."""
    name = f"protocol_q{q_bps // 100}" if q_bps < MAX_BPS else "protocol_q1"
    out = root / name
    (out / "logs").mkdir(parents=True)
    phase_log = out / "phases.jsonl"
    run_toml = out / "run.toml"
    run_toml.write_text(run_spec_toml(spec, q_bps))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           LOG_ENV: str(phase_log)}
    if rpc_census:
        env[RPC_LOG_ENV] = str(out / "rpc.jsonl")
    chain = ["--devnet-dir", str(state_dir)]
    init = run_json(["trainer.main", "init", "--json", "--run-spec", str(run_toml), "--warm-steps",
                      str(spec.warm_steps), "--warm-lr", str(spec.warm_lr), *chain], {**env, LOG_ENV: "", RPC_LOG_ENV: ""})
    owner = Ledger.open(info["rpc_url"], Path(info["deployments"]),
                        load_account(info["roles"]["pool_owner"]["private_key"]))
    per_file = max(1, -(-spec.prompts_per_file // 8))  # a file's reward grows with its samples, so must its slash
    cfg = PoolConfig(trainer=info["roles"]["trainer"]["address"], validators=[], court=DEMO_COURT,
                     min_stake=100 * TOKENS * per_file, reward_per_sample=10**16, slash_amount=50 * TOKENS * per_file,
                     bounty_bps=2_000,
                     challenge_window_s=600, reward_lock_s=900, async_level=2, task=init["task"],
                     base_checkpoint=init["base_checkpoint"], funding=10_000 * TOKENS)
    accounts = [info["roles"]["validator"], *info["workers"][workers:]][:validators]
    if len(accounts) < validators or workers > len(info["workers"]):
        raise SystemExit(f"the devnet has {len(info['workers'])} spare accounts: too few for {workers} workers and "
                         f"{validators} validators")
    fund_validators(info, [{"address": a["address"]} for a in accounts])
    with KuboClient(info["kubo_api"]) as kubo:
        run_spec = fetch_run_spec(kubo, Digest.parse(init["task"]))
    pool_id = create_pool(owner, cfg, run_spec)
    start_block = owner.w3.eth.block_number
    run_dir = out / "trainer"
    roles = Roles(out / "logs", env, out / "roles.pids")
    names = [f"validator{i}" for i in range(validators)] + ["trainer"] + [f"worker{i}" for i in range(workers)]
    infra = {"anvil": info["anvil_pid"],
             "kubo": int((Path(info["kubo_repo"]) / "proofswarm-daemon.pid").read_text().split()[0])}
    cpu_before = {k: _cpu_seconds(pid) for k, pid in infra.items()}
    accuracies: list[tuple[int, float]] = []
    try:
        for i, a in enumerate(accounts):
            roles.start(f"validator{i}", "validator.cli", "start", "--pool", str(pool_id), "--audit-rate",
                        str(audit_rate), "--fetch-timeout", str(FETCH_TIMEOUT_S), "--verdict-margin",
                        str(VERDICT_MARGIN_S), "--state-dir", str(out / f"validator{i}"), *chain,
                        env={KEY_ENV: a["private_key"], ROLE_ENV: f"validator{i}"})
        await_validators(owner, pool_id, [a["address"] for a in accounts], roles)
        launched_at = time.time()
        roles.start("trainer", "trainer.main", "start", "--pool", str(pool_id), "--devnet-trainer",
                    "--set", f"run_dir={run_dir}", "--set", "max_steps=100000",
                    *[a for kv in spec.trainer_overrides() for a in ("--set", kv)],
                    "--set", f"wait_timeout_s={max(spec.budget_s, 120)}",
                    "--eval-every", str(spec.eval_every), "--eval-problems", str(spec.eval_problems), "--json", *chain,
                    env={ROLE_ENV: "trainer"})
        for n in range(workers):
            roles.start(f"worker{n}", "worker.cli", "start", "--pool", str(pool_id), "--devnet-worker", str(n),
                        "--work-dir", str(out / f"worker{n}"), "--quiet", "--max-pending", str(max_pending), *chain,
                        *([] if pace else ["--no-pace"]),
                        env={ROLE_ENV: f"worker{n}"})
        tracker, seen = TargetTracker(spec.target, spec.target_window), 0
        while True:
            roles.check_alive(*names)
            accuracies = _accuracies(run_dir)
            reached = False
            for step, accuracy in accuracies[seen:]:
                print(f"[{name}] step {step:4d}  t={time.time() - launched_at:6.1f}s  accuracy {accuracy:.3f}",
                      flush=True)
                reached = reached or (step > 0 and tracker.reached(accuracy))
            seen = len(accuracies)
            records = read_phases(phase_log)
            evals = sum(r["s"] for r in records if r["role"] == "trainer" and r["phase"] == "eval")
            verdicts = sum(CATEGORIES.get(r["phase"]) == "verdict" for r in records)
            over = time.time() - launched_at - evals - spec.budget_s
            if reached or (over > 0 and verdicts >= min_verdicts) or over > MAX_OVERRUN_S:
                break
            time.sleep(1.0)
        stopped_at = time.time()
        cpu = {n: round(_cpu_seconds(roles.procs[n].pid), 1) for n in names}
        cpu |= {k: round(_cpu_seconds(pid) - cpu_before[k], 1) for k, pid in infra.items()}
    finally:
        roles.stop()
    records = read_phases(phase_log)
    accuracies = _accuracies(run_dir)
    reached_s = time_to_target(records, accuracies, spec, launched_at)
    wall = stopped_at - launched_at
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]
    staleness = [s for m in metrics for s in m["submission_staleness"]]
    consumed = json.loads((run_dir / "consumed.json").read_text()) if (run_dir / "consumed.json").exists() else {}
    latency = _chain_latencies(owner, pool_id, start_block)
    census = {"rpc_per_file": rpc_per_file(out / "rpc.jsonl", latency["submitted"])} if rpc_census else {}
    return VariantResult(
        name, reached_s, spec.budget_s, accuracies[-1][1] if accuracies else 0.0, max((m["step"] for m in metrics), default=0),
        role_breakdown(records, {n: wall for n in names if n.startswith("validator")})
        | role_breakdown(records, {n: wall for n in names if not n.startswith("validator")}, launched_at),
        {"q": q_bps / MAX_BPS, "pool_id": pool_id, "wall_s": round(wall, 1), "cpu_s": cpu,
         "latency": latency,
         "consumed": len(consumed.get("consumed", [])), "consumed_overturned": len(consumed.get("overturned", [])),
         "staleness_p50_p99": [percentile(staleness, 50), percentile(staleness, 99)],
         "files_taken": sum(m["files_consumed"] for m in metrics),
         "dropped_stale_groups": sum(m["dropped_stale_groups"] for m in metrics),
         "trainer_idle_s": round(sum(m["idle_s"] for m in metrics), 1)} | census)


def contract_functions() -> dict[str, str]:
    """Function selectors ("0x" + 4 bytes) of every contract → "Contract.function"."""
    from eth_utils import function_abi_to_4byte_selector

    from ledger_client.chain.contract import ABI_DIR, load_artifact

    return {hex_text(function_abi_to_4byte_selector(item)): f"{path.stem}.{item['name']}"
            for path in sorted(ABI_DIR.glob("*.json")) for item in load_artifact(path.stem)["abi"]
            if item["type"] == "function"}


def rpc_per_file(path: Path, files: int) -> dict[str, dict[str, float]]:
    """JSON-RPC requests per submitted file, per role: the total and each method, calls and estimates by contract
    function (ledger_client.chain.ledger's request log; the bench's own requests — setup, deployment — are not
    logged)."""
    functions = contract_functions()
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            r = json.loads(line)
        except ValueError:  # a line cut short by a stopped role
            continue
        counts[r["role"]][r["rpc"] + (f" {functions.get(r['selector'], r['selector'])}" if r.get("selector") else "")] += 1
    per = max(files, 1)
    return {role: {"total": round(sum(m.values()) / per, 2)}
            | {k: round(v / per, 2) for k, v in sorted(m.items(), key=lambda kv: -kv[1])}
            for role, m in sorted(counts.items())}


def seconds_per_step(r: VariantResult) -> float | None:
    """Wall seconds per trainer step up to the target (or over the whole budget when it was missed)."""
    if r.steps <= 0:
        return None
    return round((r.time_to_target_s if r.time_to_target_s is not None else r.budget_s) / r.steps, 3)


def median_result(results: list[VariantResult]) -> VariantResult:
    """The run with the median time to target (a missed target counts as longer than any reached one); its steps
    and breakdown are that run's."""
    ranked = sorted(results, key=lambda r: (r.time_to_target_s is None, r.time_to_target_s or 0.0))
    return ranked[(len(ranked) - 1) // 2]


def summarise_runs(runs: list[tuple[VariantResult, dict[str, VariantResult]]], spec: CpuRecipe,
                   args: argparse.Namespace) -> dict:
    """`summarise` of the median run of each variant, with every run's figures and the median seconds per step."""
    local = median_result([local for local, _ in runs])
    protocols = {key: median_result([p[key] for _, p in runs]) for key in runs[0][1]}
    out = summarise(local, protocols, spec, args)
    if len(runs) == 1:
        return out
    per_step = {"local": [seconds_per_step(local) for local, _ in runs]}
    per_step |= {key: [seconds_per_step(p[key]) for _, p in runs] for key in protocols}
    medians = {key: statistics.median([v for v in values if v is not None]) if any(v is not None for v in values)
               else None for key, values in per_step.items()}
    out["repeats"] = len(runs)
    out["runs"] = [{r.name: {"time_to_target_s": r.time_to_target_s, "steps": r.steps, "s_per_step": seconds_per_step(r)}
                    for r in (local, *p.values())} for local, p in runs]
    for key, value in medians.items():
        out[f"{key}_s_per_step"] = value
        if key != "local" and value is not None and medians["local"]:
            out["ratio_per_step_" + key.removeprefix("protocol_")] = round(value / medians["local"], 2)
    return out


def summarise(local: VariantResult, protocols: dict[str, VariantResult], spec: CpuRecipe, args: argparse.Namespace) -> dict:
    """The last line's JSON: the issue's keys first; a missed target gives null with its `*_min_s` bound."""
    out: dict = {"local_s": local.time_to_target_s}
    if local.time_to_target_s is None:
        out["local_min_s"] = local.budget_s
    for key, r in protocols.items():
        out[f"{key}_s"] = r.time_to_target_s
        if r.time_to_target_s is None:
            out[f"{key}_min_s"] = r.budget_s
    for key, r in protocols.items():
        ratio_key = "ratio_" + key.removeprefix("protocol_")
        if r.time_to_target_s is not None and local.time_to_target_s:
            out[ratio_key] = round(r.time_to_target_s / local.time_to_target_s, 2)
        else:
            out[ratio_key] = None
            if local.time_to_target_s and r.time_to_target_s is None:
                out[ratio_key + "_min"] = round(r.budget_s / local.time_to_target_s, 2)
    out["breakdown"] = {r.name: r.breakdown for r in (local, *protocols.values())}
    out["accuracy_end"] = {r.name: r.accuracy_end for r in (local, *protocols.values())}
    out["steps"] = {r.name: r.steps for r in (local, *protocols.values())}
    out["details"] = {r.name: r.details for r in (local, *protocols.values())}
    out |= {"target": spec.target, "target_window": spec.target_window, "budget_s": {
        "local": local.budget_s, **{k: r.budget_s for k, r in protocols.items()}},
        "cores": args.cores, "workers": args.workers, "validators": args.validators, "audit_rate": args.audit_rate, "max_pending": args.max_pending, "pace": not args.no_pace,
        "court": {"dispute_window_s": DEMO_COURT.dispute_window_s, "assigned_window_s": DEMO_COURT.assigned_window_s},
        "load_average": [round(x, 2) for x in os.getloadavg()]}
    return out


def _print(r: VariantResult) -> None:
    reached = f"{r.time_to_target_s:.1f} s" if r.time_to_target_s is not None else f">= {r.budget_s:.0f} s (missed)"
    print(f"{r.name}: time to target {reached}, accuracy {r.accuracy_end:.3f} after {r.steps} steps")
    for role, rows in r.breakdown.items():
        print(f"  {role:11} " + ", ".join(f"{k} {v:.1f}" for k, v in rows.items() if v >= 0.05))
    for key in ("cpu_s", "latency", "rpc_per_file"):
        if key in r.details:
            print(f"  {key}: {json.dumps(r.details[key])}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="target 0.25, budgets 45 s local / 80 s per protocol variant (finishes in under 5 minutes)")
    p.add_argument("--target", type=float, help="held-out accuracy to reach (default: the recipe's 0.8)")
    p.add_argument("--local-budget-s", type=float, help="seconds of RL before the local variant gives up (default 400)")
    p.add_argument("--budget-s", type=float, help="seconds before a protocol variant gives up (default 600)")
    p.add_argument("--cores", type=int, default=2, help="cores every variant runs on (the bench pins itself)")
    p.add_argument("--workers", type=int, default=1, help="worker processes in every variant")
    p.add_argument("--validators", type=int, default=1, help="honest validators of the protocol's court")
    p.add_argument("--audit-rate", type=float, default=0.0,
                   help="fraction of other validators' verdicts each validator re-checks (with one validator: none)")
    p.add_argument("--max-pending", type=int, default=BENCH_MAX_PENDING,
                   help=f"each worker's --max-pending: submissions in flight before a first verdict (default "
                        f"{BENCH_MAX_PENDING}; worker start's is {DEFAULT_MAX_PENDING})")
    p.add_argument("--q", default="0.05,1", help="the protocol variants' spot-check fractions")
    p.add_argument("--prompts-per-file", type=int,
                   help="prompts in one rollout file, locally and in the pool's run spec (default: the recipe's 8)")
    p.add_argument("--skip-local", action="store_true", help="protocol variants only (no ratio)")
    p.add_argument("--no-pace", action="store_true",
                   help="workers generate as fast as they can (worker start --no-pace), not paced on the trainer's demand")
    p.add_argument("--rpc-census", action="store_true",
                   help="count each role's JSON-RPC requests per submitted file, by method")
    p.add_argument("--repeats", type=int, default=1,
                   help="run every variant this many times, in turn, and report medians (module docstring)")
    add_record_option(p)
    args = p.parse_args(argv)
    available = sorted(os.sched_getaffinity(0))
    if args.cores > len(available):
        print(f"error: --cores {args.cores} but this process may use only {len(available)} cores")
        return EXIT_USAGE
    os.sched_setaffinity(0, available[: args.cores])
    spec = CpuRecipe()
    local_budget, budget = 400.0, 600.0
    if args.quick:
        spec, local_budget, budget = replace(spec, target=0.25), 45.0, 80.0
    spec = replace(spec, target=args.target if args.target is not None else spec.target)
    if args.prompts_per_file is not None:
        if args.prompts_per_file < 1:
            print("error: --prompts-per-file must be ≥ 1")
            return EXIT_USAGE
        spec = replace(spec, prompts_per_file=args.prompts_per_file)
    local_budget = args.local_budget_s or local_budget
    budget = args.budget_s or budget
    root = Path(tempfile.mkdtemp(prefix="bench-protocol-"))
    print(f"recipe: {spec.task.name} {spec.task.params}, G={spec.sampling.group_size}, batch {spec.batch_samples}, "
          f"lr {spec.lr}, target {spec.target} (mean of {spec.target_window}), {args.cores} cores, {args.workers} "
          f"worker(s), {args.validators} validator(s); run folders under {root}", flush=True)
    import torch

    torch.set_num_threads(1)
    if args.repeats < 1:
        print("error: --repeats must be ≥ 1")
        return EXIT_USAGE
    runs = []
    for i in range(args.repeats):
        folder = root if args.repeats == 1 else root / f"run{i}"
        folder.mkdir(exist_ok=True)
        if args.repeats > 1:
            print(f"-- run {i + 1} of {args.repeats}", flush=True)
        local = run_local(replace(spec, budget_s=local_budget), folder, args.workers) if not args.skip_local else \
            VariantResult("local", None, 0.0, 0.0, 0)
        _print(local)
        protocols: dict[str, VariantResult] = {}
        with Devnet(folder / "devnet") as info:
            for q in args.q.split(","):
                bps = round(float(q) * MAX_BPS)
                r = run_protocol(replace(spec, budget_s=budget), folder, info, folder / "devnet", bps, args.workers,
                                 args.validators, args.audit_rate, args.max_pending, rpc_census=args.rpc_census,
                                 pace=not args.no_pace)
                protocols[r.name] = r
                _print(r)
        runs.append((local, protocols))
    emit(summarise_runs(runs, spec, args), args, "protocol", argv)
    return 0


if __name__ == "__main__":
    exit_on_signals()
    sys.exit(main())
