"""`make demo`: the whole protocol, live, on the local devnet.

1. `devnet up` (anvil + Kubo + contracts);
2. `trainer init`: a tiny char-level policy, warm-started on the run spec's task, and the run
   spec itself, both added to IPFS;
3. the pool owner creates and funds a pool whose taskRef / base checkpoint are those digests;
4. separate processes: one validator (`validator start`), the trainer (`trainer start`), two
   honest workers (`worker start`) and one adversarial worker (examples/adversaries/workers.py, cycling
   through attacks);
5. after `--steps` trainer steps everything is stopped, time travels past the reward lock and
   the honest workers claim;
6. a summary table, runs/demo/summary.json and runs/demo/learning_curve.png.

Every role meets the others only through the chain and IPFS.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from dashboard.service import free_port
from deploy import devnet
from deploy.pool_cli import PoolConfig, create_pool
from ledger_client.chain.keys import load_account
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import get_work
from ledger_client.cli import DEFAULT_DEVNET_DIR, UsageError, one_line_errors
from protocol.pool import WorkStatus
from protocol.verdicts import Reason

ROOT = Path(__file__).resolve().parent.parent
ADVERSARY_ATTACKS = ["fabricated_rewards", "cherry_picked_prompts", "tampered_completion", "wrong_temperature",
                     "withheld", "perturbed_weights", "corrupted_proofs", "truncated_completion"]


class Roles:
    """The role processes of the demo, each logging to its own file."""

    def __init__(self, log_dir: Path, env: dict[str, str]):
        self.log_dir = log_dir
        self.env = env
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, *args: str) -> None:
        log = open(self.log_dir / f"{name}.log", "wb")
        self.procs[name] = subprocess.Popen([sys.executable, "-m", *args], cwd=ROOT, env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def check_alive(self, *names: str) -> None:
        for name in names:
            code = self.procs[name].poll()
            if code not in (None, 0):
                tail = (self.log_dir / f"{name}.log").read_text(errors="replace").strip().splitlines()[-1:]
                raise UsageError(f"the {name} process exited with code {code}: {' '.join(tail)}")

    def stop(self, timeout: float = 30.0) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in self.procs.values():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()


def _run_json(args: list[str], env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise UsageError(f"{' '.join(args[:2])} failed: {proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        return json.loads(proc.stdout.strip().splitlines()[-1])


def run_demo(args: argparse.Namespace, console: Console) -> dict:
    out = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    (out / "logs").mkdir(parents=True)
    info, started = devnet.up(args.state_dir)
    console.print(f"devnet {'started' if started else 'already up'}: rpc {info['rpc_url']}, kubo {info['kubo_api_url']}")
    state_dir = str(args.state_dir.resolve())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    chain = ["--devnet-dir", state_dir]

    t0 = time.monotonic()
    console.print("trainer init: building and warm-starting the policy, adding it and the run spec to IPFS…")
    init = _run_json(["trainer.main", "init", "--run-spec", str(args.run_spec), "--warm-steps", str(args.warm_steps),
                      "--devnet-dir", state_dir], env)
    owner = Ledger.open(info["rpc_url"], Path(info["deployments"]), load_account(info["roles"]["pool_owner"]["private_key"]))
    cfg = PoolConfig(trainer=info["roles"]["trainer"]["address"], validators=[info["roles"]["validator"]["address"]],
                     min_stake=100 * 10**18, reward_per_sample=10**16, slash_amount=50 * 10**18, bounty_bps=2_000,
                     challenge_window_s=600, reward_lock_s=900, async_level=2, task=init["task"],
                     base_checkpoint=init["base_checkpoint"], funding=10_000 * 10**18)
    pool_id = create_pool(owner, cfg)
    start_block = owner.w3.eth.block_number
    console.print(f"pool {pool_id}: task {init['task'][:18]}…, base checkpoint {init['base_checkpoint'][:18]}…")

    roles = Roles(out / "logs", env)
    explorer = Roles(out / "logs", env)
    run_dir = out / "trainer"
    port = args.explorer_port or free_port()
    explorer.start("explorer", "dashboard.cli", "start", "--port", str(port), "--db", str(out / "explorer.sqlite"),
                   "--summary", str(out / "summary.json"), *chain)
    console.print(f"explorer: http://127.0.0.1:{port}/pool/{pool_id}  (live while the demo runs)")
    try:
        roles.start("validator", "validator.cli", "start", "--pool", str(pool_id), "--devnet-validator",
                    "--state-dir", str(out / "validator"), "--metrics-port", str(args.metrics_port), *chain)
        roles.start("trainer", "trainer.main", "start", "--pool", str(pool_id), "--devnet-trainer",
                    "--set", f"run_dir={run_dir}", "--set", f"max_steps={args.steps}",
                    "--set", f"batch_samples={args.batch_samples}", "--set", "optim.lr=5e-4",
                    "--set", "wait_timeout_s=300",
                    "--eval-every", str(args.eval_every), "--eval-problems", str(args.eval_problems), "--json", *chain)
        for n in (0, 1):
            roles.start(f"worker{n}", "worker.cli", "start", "--pool", str(pool_id), "--devnet-worker", str(n),
                        "--work-dir", str(out / f"worker{n}"), "--quiet", *chain)
        roles.start("adversary", "examples.adversaries.workers", "--pool", str(pool_id), "--devnet-worker", "2",
                    "--work-dir", str(out / "adversary"), *[a for name in ADVERSARY_ATTACKS for a in ("--attack", name)],
                    *chain)
        done = run_dir / "trainer.done"
        deadline = time.monotonic() + args.timeout
        last = -1
        while not done.exists():
            roles.check_alive("validator", "trainer", "worker0", "worker1", "adversary")
            explorer.check_alive("explorer")
            if time.monotonic() > deadline:
                raise UsageError(f"the trainer did not finish {args.steps} steps within {args.timeout:.0f}s "
                                 f"(logs in {out / 'logs'})")
            step = _trainer_step(run_dir)
            if step != last:
                console.print(f"  trainer step {step}/{args.steps}  ({time.monotonic() - t0:.0f}s)")
                last = step
            time.sleep(2)
    finally:
        roles.stop()

    # Let the reward lock pass on the devnet and have the honest workers claim.
    owner.w3.provider.make_request("evm_increaseTime", [cfg.reward_lock_s + 1])
    owner.w3.provider.make_request("evm_mine", [])
    try:
        for n in (0, 1):
            _run_json(["worker.cli", "claim", "--pool", str(pool_id), "--devnet-worker", str(n), "--json", *chain], env)
        summary = _summary(owner, pool_id, start_block, run_dir, info, cfg, time.monotonic() - t0, out)
        summary["explorer"] = f"http://127.0.0.1:{port}"
        if args.serve:
            console.print(f"explorer serving at http://127.0.0.1:{port} (summary at /summary); Ctrl-C to stop")
            try:
                while explorer.procs["explorer"].poll() is None:
                    time.sleep(1)
            except KeyboardInterrupt:
                pass
        return summary
    finally:
        explorer.stop()



def _trainer_step(run_dir: Path) -> int:
    path = run_dir / "consumed.json"
    try:
        return json.loads(path.read_text())["step"]
    except (OSError, ValueError, KeyError):
        return 0


def _summary(ledger: Ledger, pool_id: int, start_block: int, run_dir: Path, info: dict, cfg: PoolConfig,
             seconds: float, out: Path) -> dict:
    events = ledger.pool.contract.events
    submitted = [e for e in events.WorkSubmitted.get_logs(from_block=start_block) if e["args"]["poolId"] == pool_id]
    challenged = [e for e in events.WorkChallenged.get_logs(from_block=start_block) if e["args"]["poolId"] == pool_id]
    accepted = [e for e in events.WorkAccepted.get_logs(from_block=start_block) if e["args"]["poolId"] == pool_id]
    slashes = ledger.stake.contract.events.Slashed.get_logs(from_block=start_block)
    claims = events.RewardsClaimed.get_logs(from_block=start_block)
    adversary = info["workers"][2]["address"]
    honest = {w["address"] for w in info["workers"][:2]}
    by_worker = {bytes(e["args"]["workId"]): e["args"]["worker"] for e in submitted}
    consumed = json.loads((run_dir / "consumed.json").read_text())["consumed"]
    consumed_unaccepted = sum(get_work(ledger, bytes.fromhex(w[2:])).status not in (WorkStatus.ACCEPTED, WorkStatus.PAID)
                              for w in consumed)
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    accuracy = [(m["step"], m["accuracy"]) for m in metrics if "accuracy" in m]
    summary = {
        "chain_id": info["chain_id"],
        "pool_id": pool_id,
        "steps": max((m["step"] for m in metrics), default=0),
        "submitted": len(submitted),
        "accepted": len(accepted),
        "challenged": dict(Counter(Reason(e["args"]["reasonCode"]).name for e in challenged)),
        "adversary_submissions": sum(1 for w in by_worker.values() if w == adversary),
        "adversary_challenged": sum(1 for e in challenged if by_worker[bytes(e["args"]["workId"])] == adversary),
        "honest_challenged": sum(1 for e in challenged if by_worker[bytes(e["args"]["workId"])] in honest),
        "slashed": [{"worker": e["args"]["worker"], "amount": e["args"]["amount"]} for e in slashes],
        "slashed_total": sum(e["args"]["amount"] for e in slashes),
        "claimed": [{"worker": e["args"]["worker"], "amount": e["args"]["amount"]} for e in claims],
        "accuracy_start": accuracy[0][1] if accuracy else None,
        "accuracy_end": accuracy[-1][1] if accuracy else None,
        "consumed": len(consumed),
        "consumed_unaccepted": consumed_unaccepted,
        "wall_s": round(seconds, 1),
        "reward_per_sample": cfg.reward_per_sample,
        "slash_amount": cfg.slash_amount,
    }
    _plot(metrics, out / "learning_curve.png")
    tmp = out / ".summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    tmp.replace(out / "summary.json")
    return summary


def _plot(metrics: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    steps = [m["step"] for m in metrics if "reward" in m and m.get("reward") is not None]
    axes[0].plot(steps, [m["reward"] for m in metrics if "reward" in m and m.get("reward") is not None])
    axes[0].set(title="mean reward of consumed rollouts", xlabel="trainer step")
    acc = [(m["step"], m["accuracy"]) for m in metrics if "accuracy" in m]
    axes[1].plot([a for a, _ in acc], [b for _, b in acc], marker="o")
    axes[1].set(title="greedy held-out accuracy", xlabel="trainer step", ylim=(0, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _print(summary: dict, console: Console) -> None:
    table = Table(title=f"proofswarm demo — pool {summary['pool_id']}, {summary['steps']} steps, "
                        f"{summary['wall_s']}s", show_header=False)
    for key in ("submitted", "accepted", "challenged", "adversary_submissions", "adversary_challenged",
                "honest_challenged", "slashed_total", "consumed", "consumed_unaccepted", "accuracy_start",
                "accuracy_end"):
        table.add_row(key, str(summary[key]))
    for c in summary["claimed"]:
        table.add_row("claimed", f"{c['worker']}: {c['amount']}")
    console.print(table)


@one_line_errors
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="demo", description=__doc__.splitlines()[0])
    p.add_argument("--state-dir", type=Path, default=DEFAULT_DEVNET_DIR)
    p.add_argument("--out", type=Path, default=Path("runs/demo"))
    p.add_argument("--run-spec", type=Path, default=ROOT / "examples/run.toml")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-samples", type=int, default=128)
    p.add_argument("--warm-steps", type=int, default=25)
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--eval-problems", type=int, default=100)
    p.add_argument("--timeout", type=float, default=1200)
    p.add_argument("--metrics-port", type=int, default=9464)
    p.add_argument("--explorer-port", type=int, default=0, help="port of the pool explorer (default: a free one)")
    p.add_argument("--serve", action="store_true", help="keep the explorer serving after the demo, until Ctrl-C")
    p.add_argument("--down-after", action="store_true", help="stop the devnet at the end")
    args = p.parse_args(argv)
    console = Console()
    try:
        summary = run_demo(args, console)
    finally:
        if args.down_after:
            devnet.down(args.state_dir)
    _print(summary, console)
    console.print(f"wrote {args.out / 'summary.json'} and {args.out / 'learning_curve.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
