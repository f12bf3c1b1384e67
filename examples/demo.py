"""`make demo`: the whole protocol, live, on the local devnet.

1. `devnet up` (anvil + Kubo + contracts);
2. `trainer init`: a tiny char-level policy, warm-started on the run spec's task, and the run
   spec itself, both added to IPFS;
3. the pool owner creates and funds a pool whose taskRef / base checkpoint are those digests;
4. separate processes: the pool is judged by the ValidatorCourt, with two honest bonded validators
   (`validator start`, re-checking every other validator's verdicts) and one dishonest one
   (adversaries/validators.py, `--adversarial-validator`, attest-all by default); the trainer
   (`trainer start` with examples/cpu_run.py's recipe, which consumes a submission only once its verdict is
   final: no dispute can overturn it any more), two honest workers (`worker start`) and one adversarial worker
   (adversaries/workers.py, cycling through attacks);
5. a progress line at each trainer step (step, held-out accuracy, files consumed, verdicts given and final,
   disputes); the adversary stops at the first evaluation at `--target`, so that its last cases settle while
   the trainer goes on; once held-out accuracy reaches `--target` (the mean of the latest three evaluations), or after
   `--steps` trainer steps, everything is stopped, the open court cases settle, time travels past the reward
   lock and the honest workers claim;
6. a summary for people (examples/demo_table.py: tokens, not base units; at most 80 columns), runs/demo/summary.json
   (base units) and runs/demo/learning_curve.png, with the demo's checks:
   every adversary submission judged by the end is challenged, no honest one is (work still
   unjudged at the end is reported as `adversary_pending`), the dishonest validator lost stake and no
   honest validator lost any, and the trainer consumed only work that ended accepted, none overturned; `validators` lists each validator's verdicts, disputes won and lost, and
   stake change. The demo exits 1 if a check fails.

Repeatable: each run creates a new pool (work ids and file bindings are per pool, so nothing collides
with an earlier run), starts from an empty `--out`, and first stops the role processes a killed
earlier run left behind (their pids are recorded in `--out`/roles.pids).
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

from adversaries import VALIDATOR_CONDUCTS
from cli.devnet import DEVNET_DIR_HELP, default_devnet_dir
from cli.errors import UsageError, one_line_errors
from dashboard.service import free_port
from deploy import devnet
from deploy.anvil import stop_pid
from deploy.pools import CourtConfig, PoolConfig, create_pool
from examples.cpu_run import CpuRecipe, TargetTracker
from examples.demo_table import summary_lines
from ledger_client.chain.keys import KEY_ENV, load_account
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import chain_time, eligible_judge, get_work
from ledger_client.ipfs.content import fetch_run_spec
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import Digest
from protocol.pool import CaseState, WorkStatus
from protocol.verdicts import Reason
from trainer.consumed_log import read_consumed
from worker.cli import EXPLORER_ENV

ROOT = Path(__file__).resolve().parent.parent
ADVERSARY_ATTACKS = ["fabricated_rewards", "cherry_picked_prompts", "tampered_completion", "wrong_temperature",
                     "withheld", "perturbed_weights", "corrupted_proofs", "truncated_completion"]
ADVERSARY_INTERVAL_S = 5
"""The adversary starts a file at most every 5 s (~60 in a run, each attack ~7 times). Unpaced it made a fifth of
the pool's files (100 of 513), each checked twice and a third of them disputed, on the same two cores as the work
the trainer learns from."""

TARGET_WINDOW = 3
"""Evaluations averaged for the stop rule: one greedy evaluation swings by ±0.1 (examples.cpu_run.TargetTracker)."""
PIDS_FILE = "roles.pids"
PROGRESS_EVERY_S = 20
"""A progress line at each trainer step, and at least this often."""
FETCH_TIMEOUT_S = 5
"""One fetch attempt: every role shares the devnet's one Kubo node, where a file that exists is read in
milliseconds; a file still missing after 5 s is withheld (docs/protocol.md, "Sizing the dispute window")."""
FETCH_ATTEMPTS = 2
"""Fetches before a file is challenged UNAVAILABLE: a second one 10 s after the first guards against a hiccup of
the one node; a third (the default) only made the withheld files judged last keep the demo's settling waiting."""
VERDICT_MARGIN_S = 10
"""Kept to send a dispute before its window closes: the devnet mines a transaction within its 1 s block."""
DISPUTE_WINDOW_S = 30
"""≥ FETCH_TIMEOUT_S + VERDICT_MARGIN_S (what `validator start` requires), with the rest for an auditor's queue
of checks on a loaded two-core machine."""
TOKENS = 10**18
DEMO_COURT = CourtConfig(
    # a bond of 6,000: the attest-all validator loses a wrong-verdict slash (60) for every adversary file it judges
    # (33 in a 66-step run), and each open verdict reserves another 60 until final; with 2,000 it ran out in a long
    # run and, still drawn as judge without the stake a verdict reserves, held a third of the files for the
    # 60 s assigned window (the court now lets a stand-in judge those at once: docs/protocol.md, "first verdict")
    validator_bond=6_000 * TOKENS, verdict_fee=TOKENS // 100, dispute_bond=20 * TOKENS,
    wrong_verdict_slash=60 * TOKENS, non_voter_penalty=10 * TOKENS, silence_penalty=5 * TOKENS,
    assigned_window_s=60, verdict_window_s=180, dispute_window_s=DISPUTE_WINDOW_S, commit_period_s=20,
    reveal_period_s=10, activation_delay_s=5, committee_size=3, fee_funding=100 * TOKENS)
"""The demo's court: three validators, so a dispute's committee is the one validator that is neither the judge
nor the disputer (a committee is short only when fewer are eligible). The trainer waits for finality: every
validator audits every verdict (`--audit-rate 1`) and concurs with the ones its check confirms, so an undisputed
verdict is final within seconds (docs/protocol.md, "Early finality"); the dispute window bounds the rest and is
sized from measured fetch and check times ("Sizing the dispute window"). A dispute is decided within its commit
and reveal periods (a committee member checks and commits within seconds of its draw, which comes two blocks
after the dispute), so the settling at the end takes no longer; the assigned and verdict windows only bound lapsed
and withheld work and stay generous for a loaded two-core machine."""
VALIDATOR_TOKENS = 7_000 * TOKENS


class Roles:
    """The role processes of the demo, each logging to its own file; pids recorded in `pids_file`."""

    def __init__(self, log_dir: Path, env: dict[str, str], pids_file: Path):
        self.log_dir = log_dir
        self.env = env
        self.pids_file = pids_file
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> None:
        log = open(self.log_dir / f"{name}.log", "wb")
        self.procs[name] = subprocess.Popen([sys.executable, "-m", *args], cwd=ROOT, env={**self.env, **(env or {})},
                                            stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        with open(self.pids_file, "a") as pids:
            pids.write(f"{self.procs[name].pid} {args[0]}\n")

    def check_alive(self, *names: str) -> None:
        for name in names:
            code = self.procs[name].poll()
            if code not in (None, 0):
                tail = (self.log_dir / f"{name}.log").read_text(errors="replace").strip().splitlines()[-1:]
                raise UsageError(f"the {name} process exited with code {code}: {' '.join(tail)}")

    def stop(self, *names: str, timeout: float = 30.0) -> None:
        """Stop the named roles (all when none are named): SIGTERM, then SIGKILL after `timeout`."""
        procs = [self.procs[n] for n in names] if names else list(self.procs.values())
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()


def await_validators(ledger: Ledger, pool_id: int, addresses: list[str], roles: Roles, timeout: float = 600.0) -> None:
    """Wait until every validator is registered with the court and its registration is active: work submitted
    earlier has no eligible validator (NotEligible) and waits for its verdict window to lapse. A validator registers
    once its checker processes are up: ~15 s on idle cores, over 120 s in CI (four test modules at once on 2 cores,
    each demo starting three validators); a role that exits is reported at once, so the timeout only bounds a hang."""
    delay = ledger.court.get_params(pool_id).activation_delay
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        roles.check_alive(*roles.procs)
        views = [ledger.court.get_validator(pool_id, a) for a in addresses]
        now = chain_time(ledger)
        if all(eligible_judge(v, delay, now) for v in views):
            return
        time.sleep(0.5)
    raise UsageError(f"the validators did not register with the court within {timeout:.0f} s")


def stop_leftover_roles(pids_file: Path) -> list[str]:
    """Stop the role processes a killed earlier run recorded in `pids_file` (each only if its command line
    is still that role's module, so a reused pid is left alone); returns the modules stopped."""
    try:
        lines = pids_file.read_text().split("\n")
    except OSError:
        return []
    stopped = []
    for line in lines:
        pid, _, module = line.partition(" ")
        if pid.isdigit() and module and stop_pid(int(pid), module):
            stopped.append(module)
    return stopped


def run_json(args: list[str], env: dict[str, str]) -> dict:
    """`python -m *args` from the repository's root: its JSON output (the last line, when it prints more);
    UsageError with its last error line when it fails."""
    proc = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise UsageError(f"{' '.join(args[:2])} failed: {proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        return json.loads(proc.stdout.strip().splitlines()[-1])


def run_demo(args: argparse.Namespace, console: Console) -> dict:
    out = args.out.resolve()
    leftover = stop_leftover_roles(out / PIDS_FILE)
    if leftover:
        console.print(f"stopped {len(leftover)} role processes left by an interrupted run: {', '.join(leftover)}")
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
    init = run_json(["trainer.main", "init", "--json", "--run-spec", str(args.run_spec), "--warm-steps", str(args.warm_steps),
                      "--devnet-dir", state_dir], env)
    owner = Ledger.open(info["rpc_url"], Path(info["deployments"]), load_account(info["roles"]["pool_owner"]["private_key"]))
    cfg = PoolConfig(trainer=info["roles"]["trainer"]["address"], validators=[], court=DEMO_COURT,
                     min_stake=100 * 10**18, reward_per_sample=10**16, slash_amount=50 * 10**18, bounty_bps=2_000,
                     challenge_window_s=600, reward_lock_s=900, async_level=2, task=init["task"],
                     base_checkpoint=init["base_checkpoint"], funding=10_000 * 10**18)
    validators = _validator_accounts(info, args.adversarial_validator)
    fund_validators(info, validators)
    with KuboClient(info["kubo_api"]) as kubo:
        spec = fetch_run_spec(kubo, Digest.parse(init["task"]))
    pool_id = create_pool(owner, cfg, spec)
    start_block = owner.w3.eth.block_number
    console.print(f"pool {pool_id}: task {init['task']}, base checkpoint {init['base_checkpoint']}")

    roles = Roles(out / "logs", env, out / PIDS_FILE)
    explorer = Roles(out / "logs", env, out / PIDS_FILE)
    run_dir = out / "trainer"
    port = args.explorer_port or free_port()
    explorer.start("explorer", "dashboard.cli", "start", "--port", str(port), "--db", str(out / "explorer.sqlite"),
                   "--summary", str(out / "summary.json"), *chain)
    base = f"http://127.0.0.1:{port}"
    console.print(f"explorer: {base}/pool/{pool_id}  (live while the demo runs)")
    dishonest = next(v for v in validators if v["conduct"] != "honest")
    console.print(f"  the adversary's files, and why each was challenged: {base}/worker/{info['workers'][2]['address']}")
    console.print(f"  the {dishonest['conduct']} validator: its verdicts, the disputes and votes that overturned them, "
                  f"the stake it lost: {base}/validator/{dishonest['address']}")
    console.print(f"  the court's cases, committees and votes: {base}/pool/{pool_id}/court")
    roles.env = {**roles.env, EXPLORER_ENV: base}  # workers link each challenge to its page there
    try:
        for v in validators:
            module = ["validator.cli"] if v["conduct"] == "honest" else \
                ["adversaries.validators", "--conduct", v["conduct"]]
            roles.start(v["name"], *module, "start", "--pool", str(pool_id), "--audit-rate", "1",
                        "--fetch-timeout", str(FETCH_TIMEOUT_S), "--fetch-attempts", str(FETCH_ATTEMPTS),
                        "--verdict-margin", str(VERDICT_MARGIN_S),
                        "--state-dir", str(out / v["name"]), "--metrics-port",
                        str(args.metrics_port if args.metrics_port and v["name"] == "validator" else free_port()),
                        *chain, env={KEY_ENV: v["private_key"]})
        recipe = [a for o in CpuRecipe().trainer_overrides() for a in ("--set", o)]
        roles.start("trainer", "trainer.main", "start", "--pool", str(pool_id), "--devnet-trainer",
                    "--set", f"run_dir={run_dir}", "--set", f"max_steps={args.steps}", *recipe,
                    "--set", "wait_timeout_s=300",
                    "--eval-every", str(args.eval_every), "--eval-problems", str(args.eval_problems), "--json", *chain)
        # the honest workers start with the validators (imports, stake, weights) and wait for the court to be able
        # to judge before their first file (WorkerDaemon.court_has_judge); the adversary starts once every
        # validator is eligible: a case is audited only by its set, and an attest-all judge alone in it would make
        # its acceptance final at once
        for n in (0, 1):
            roles.start(f"worker{n}", "worker.cli", "start", "--pool", str(pool_id), "--devnet-worker", str(n),
                        "--work-dir", str(out / f"worker{n}"), "--quiet", *chain)
        await_validators(owner, pool_id, [v["address"] for v in validators], roles)
        roles.start("adversary", "adversaries.workers", "--pool", str(pool_id), "--devnet-worker", "2",
                    "--work-dir", str(out / "adversary"), "--min-interval", str(ADVERSARY_INTERVAL_S),
                    *[a for name in ADVERSARY_ATTACKS for a in ("--attack", name)],
                    *chain)
        done = run_dir / "trainer.done"
        deadline = time.monotonic() + args.timeout
        last, next_line = -1, 0.0
        learned = TargetTracker(args.target, TARGET_WINDOW)
        evaluated = 1  # the step-0 evaluation is not learning
        attacking = ["adversary"]
        while not done.exists():
            accuracies = _accuracies(run_dir)
            if any(learned.reached(a) for a in accuracies[evaluated:]):
                console.print(f"  held-out accuracy reached {args.target} (mean of the latest {TARGET_WINDOW} "
                              f"evaluations) at step {_trainer_step(run_dir)}: stopping")
                break
            if attacking and any(a >= args.target for a in accuracies[1:]):
                # its cases (a withheld file's fetch attempts, then a dispute's commit and reveal) settle while the
                # trainer's mean of three catches up, not after it
                console.print(f"  an evaluation reached {args.target}: the adversary stops")
                roles.stop(*attacking)
                attacking = []
            evaluated = max(evaluated, len(accuracies))
            roles.check_alive(*(v["name"] for v in validators), "trainer", "worker0", "worker1", *attacking)
            explorer.check_alive("explorer")
            if time.monotonic() > deadline:
                raise UsageError(f"the trainer did not finish {args.steps} steps within {args.timeout:.0f}s "
                                 f"(logs in {out / 'logs'})")
            step = _trainer_step(run_dir)
            if step != last or time.monotonic() >= next_line:
                console.print(f"  {time.monotonic() - t0:4.0f}s  "
                              f"{_progress(owner, pool_id, start_block, run_dir, step, args.steps)}", soft_wrap=True)
                last, next_line = step, time.monotonic() + PROGRESS_EVERY_S
            time.sleep(2)
        roles.stop("trainer", "worker0", "worker1", "adversary")
        _settle(owner, pool_id, start_block, roles, [v["name"] for v in validators], args.settle_timeout, console)
    except BaseException:  # a failed or interrupted run leaves no explorer behind either
        explorer.stop()
        raise
    finally:
        roles.stop()

    # Let the reward lock pass on the devnet and have the honest workers claim.
    owner.w3.provider.make_request("evm_increaseTime", [cfg.reward_lock_s + 1])
    owner.w3.provider.make_request("evm_mine", [])
    try:
        for n in (0, 1):
            run_json(["worker.cli", "claim", "--pool", str(pool_id), "--devnet-worker", str(n), "--json", *chain], env)
        summary = _summary(owner, pool_id, start_block, run_dir, info, cfg, time.monotonic() - t0, out, validators)
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



def _settle(ledger: Ledger, pool_id: int, start_block: int, roles: Roles, validator_roles: list[str],
            timeout: float, console: Console) -> None:
    """With the workers stopped, keep the validators running until every submission's court case is final
    (disputes drawn, voted, revealed and resolved; verdicts finalized), at most `timeout` seconds, so that
    the summary shows who lost what; what is still open then is reported as pending."""
    submitted = [bytes(e["args"]["workId"]) for e in ledger.pool.contract.events.WorkSubmitted.get_logs(
        from_block=start_block) if e["args"]["poolId"] == pool_id]
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        states = Counter(CaseState(ledger.court.cases(w).state) for w in submitted)
        open_states = {state: n for state, n in sorted(states.items()) if state not in (CaseState.FINAL, CaseState.VOID)}
        open_cases = sum(open_states.values())
        if open_cases == 0:
            return
        if open_cases != last:
            kinds = ", ".join(f"{n} {state.name.lower()}" for state, n in open_states.items())
            console.print(f"  settling: {open_cases} court cases not final yet ({kinds})")
            last = open_cases
        roles.check_alive(*validator_roles)
        time.sleep(2)


def _validator_accounts(info: dict, adversarial: str) -> list[dict]:
    """The demo's validators: the devnet's validator and worker account 3 honest, worker account 4 `adversarial`."""
    accounts = [("validator", "honest", info["roles"]["validator"]), ("validator2", "honest", info["workers"][3]),
                ("adversarial-validator", adversarial, info["workers"][4])]
    return [{"name": name, "conduct": conduct, "address": a["address"], "private_key": a["private_key"]}
            for name, conduct, a in accounts]


def fund_validators(info: dict, validators: list[dict]) -> None:
    """Mint the devnet stake token to validators that hold less than their bond needs (the deployer may mint)."""
    deployer = Ledger.open(info["rpc_url"], Path(info["deployments"]),
                           load_account(info["roles"]["deployer"]["private_key"]))
    for v in validators:
        balance = deployer.token.balance_of(v["address"])
        if balance < VALIDATOR_TOKENS:
            deployer.token.mint(v["address"], VALIDATOR_TOKENS - balance)


def _validator_summary(ledger: Ledger, pool_id: int, start_block: int, validators: list[dict]) -> list[dict]:
    """Each validator's verdicts, disputes won and lost, and what it lost (penalties) and earned (credits)."""
    events = ledger.court.contract.events
    mine = lambda e: e["args"].get("poolId", pool_id) == pool_id  # noqa: E731
    verdicts = [e for e in events.VerdictGiven.get_logs(from_block=start_block) if mine(e)]
    disputes = [e for e in events.Disputed.get_logs(from_block=start_block) if mine(e)]
    outcome = {bytes(e["args"]["workId"]): e["args"]["overturned"]
               for e in events.DisputeResolved.get_logs(from_block=start_block)}
    penalties = [e for e in events.ValidatorPenalized.get_logs(from_block=start_block) if mine(e)]
    credits = events.Credited.get_logs(from_block=start_block)
    rows = []
    for v in validators:
        who = v["address"]
        given = [bytes(e["args"]["workId"]) for e in verdicts if e["args"]["judge"] == who]
        raised = [bytes(e["args"]["workId"]) for e in disputes if e["args"]["disputer"] == who]
        lost = sum(e["args"]["amount"] for e in penalties if e["args"]["party"] == who)
        rows.append({
            "name": v["name"], "conduct": v["conduct"], "address": who,
            "verdicts": len(given),
            "verdicts_overturned": sum(outcome.get(w) is True for w in given),
            "disputes_won": sum(outcome.get(w) is True for w in raised),
            "disputes_lost": sum(outcome.get(w) is False for w in raised),
            "disputes_open": sum(w not in outcome for w in raised),
            "stake_change": -lost,
            "earned": sum(e["args"]["amount"] for e in credits if e["args"]["to"] == who),
        })
    return rows


def _progress(ledger: Ledger, pool_id: int, start_block: int, run_dir: Path, step: int, steps: int) -> str:
    """The run so far in one line: the trainer's step, its latest held-out accuracy and the files it consumed
    (final verdicts only), the court's verdicts (final ones: the pool's accepted and challenged work) and disputes."""
    pool, court = ledger.pool.contract.events, ledger.court.contract.events
    def mine(event) -> int:
        return sum(e["args"]["poolId"] == pool_id for e in event.get_logs(from_block=start_block))

    final = mine(pool.WorkAccepted) + mine(pool.WorkChallenged)
    accuracy = _latest_accuracy(run_dir)
    return (f"step {step}/{steps}  accuracy {'-' if accuracy is None else f'{accuracy:.2f}'}  "
            f"consumed {_trainer_record(run_dir).get('consumed', 0)}  verdicts {mine(court.VerdictGiven)} "
            f"(final {final})  disputes {mine(court.Disputed)}")


def _accuracies(run_dir: Path) -> list[float]:
    """The trainer's held-out accuracies so far, the step-0 evaluation first."""
    try:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    except OSError:
        return []
    return [json.loads(line)["accuracy"] for line in lines if '"accuracy"' in line]


def _latest_accuracy(run_dir: Path) -> float | None:
    accuracy = _accuracies(run_dir)
    return accuracy[-1] if accuracy else None


def _trainer_record(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "consumed.json").read_text())
    except (OSError, ValueError):
        return {}


def _trainer_step(run_dir: Path) -> int:
    return _trainer_record(run_dir).get("step", 0)


def _summary(ledger: Ledger, pool_id: int, start_block: int, run_dir: Path, info: dict, cfg: PoolConfig,
             seconds: float, out: Path, validators: list[dict]) -> dict:
    events = ledger.pool.contract.events
    submitted = [e for e in events.WorkSubmitted.get_logs(from_block=start_block) if e["args"]["poolId"] == pool_id]
    challenged = [e for e in events.WorkChallenged.get_logs(from_block=start_block) if e["args"]["poolId"] == pool_id]
    accepted = [e for e in events.WorkAccepted.get_logs(from_block=start_block) if e["args"]["poolId"] == pool_id]
    slashes = ledger.stake.contract.events.Slashed.get_logs(from_block=start_block)
    claims = events.RewardsClaimed.get_logs(from_block=start_block)
    adversary = info["workers"][2]["address"]
    honest = {w["address"] for w in info["workers"][:2]}
    by_worker = {bytes(e["args"]["workId"]): e["args"]["worker"] for e in submitted}
    adversary_status = Counter(get_work(ledger, w).status for w, who in by_worker.items() if who == adversary)
    adversary_judged = sum(adversary_status.values()) - adversary_status[WorkStatus.PENDING]
    honest_challenged = sum(1 for e in challenged if by_worker[bytes(e["args"]["workId"])] in honest)
    trainer_record = json.loads((run_dir / "consumed.json").read_text())
    consumed = read_consumed(run_dir / trainer_record["consumed_log"])
    court = _validator_summary(ledger, pool_id, start_block, validators)
    honest_validators = [v for v in court if v["conduct"] == "honest"]
    dishonest = [v for v in court if v["conduct"] != "honest"]
    slash = cfg.court.wrong_verdict_slash
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
        "adversary_pending": adversary_status[WorkStatus.PENDING],
        "honest_challenged": honest_challenged,
        "checks": {"every_judged_adversary_submission_challenged": adversary_status[WorkStatus.REJECTED] == adversary_judged,
                   "no_honest_submission_challenged": honest_challenged == 0,
                   "no_honest_validator_lost_stake": all(v["stake_change"] == 0 for v in honest_validators),
                   "every_overturned_verdict_slashed": all(-v["stake_change"] >= v["verdicts_overturned"] * slash
                                                           for v in court),
                   "trainer_consumed_only_final_accepted_work": consumed_unaccepted == 0
                                                                and not trainer_record.get("overturned")},
        "validators": court,
        "dishonest_validator_stake_change": sum(v["stake_change"] for v in dishonest),
        "slashed": [{"worker": e["args"]["worker"], "amount": e["args"]["amount"]} for e in slashes],
        "slashed_total": sum(e["args"]["amount"] for e in slashes),
        "token": ledger.token.symbol(),
        "claimed": [{"worker": e["args"]["worker"], "amount": e["args"]["amount"]} for e in claims],
        "accuracy_start": accuracy[0][1] if accuracy else None,
        "accuracy_end": accuracy[-1][1] if accuracy else None,
        "consumed": len(consumed),
        "consumed_unaccepted": consumed_unaccepted,
        "consumed_overturned": len(trainer_record.get("overturned", [])),
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
    for line in summary_lines(summary):
        console.print(line, markup=False, highlight=False)


class DemoCheckFailed(RuntimeError):
    """The run finished but a protocol property the demo checks did not hold."""


@one_line_errors(failures=(DemoCheckFailed,))
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="demo", description=__doc__.splitlines()[0])
    p.add_argument("--state-dir", type=Path, default=default_devnet_dir(), help=DEVNET_DIR_HELP)
    p.add_argument("--out", type=Path, default=Path("runs/demo"))
    p.add_argument("--run-spec", type=Path, default=ROOT / "examples/run.toml")
    p.add_argument("--steps", type=int, default=80, help="the most trainer steps (default %(default)s)")
    p.add_argument("--target", type=float, default=0.65,
                   help=f"stop once held-out accuracy (the mean of the latest {TARGET_WINDOW} evaluations) reaches this "
                        "(default %(default)s; above 1: run all --steps)")
    p.add_argument("--warm-steps", type=int, default=25)
    p.add_argument("--eval-every", type=int, default=2,
                   help="trainer steps between held-out evaluations (default %(default)s: the stop rule's mean of "
                        "three spans four steps; at 5 it spanned ten and the demo ran on past the target)")
    p.add_argument("--eval-problems", type=int, default=CpuRecipe.eval_problems,
                   help="held-out problems per evaluation (default %(default)s, the CPU recipe's)")
    p.add_argument("--timeout", type=float, default=1200)
    p.add_argument("--metrics-port", type=int, default=0, help="first validator's metrics port (default: a free one)")
    p.add_argument("--adversarial-validator", default="attest-all", choices=sorted(VALIDATOR_CONDUCTS),
                   help="conduct of the third validator (adversaries/validators.py)")
    p.add_argument("--settle-timeout", type=float, default=300,
                   help="after the last step, seconds the validators get to make every court case final "
                        "(disputes resolved), so the summary shows who lost stake (0: summarise at once)")
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
    failed = [name for name, ok in summary["checks"].items() if not ok]
    if failed:
        raise DemoCheckFailed(f"demo checks failed: {', '.join(failed)} (see {args.out / 'summary.json'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
