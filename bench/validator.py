"""How many workers one validator keeps up with: `python -m bench.validator [--quick]`.

A real anvil, a real Kubo node and a real (tiny) policy. N simulated workers each submit real
rollout files (generated beforehand, with TOPLOC proofs, for their own address and
assignment) at the rate one worker on this machine generates them; one validator daemon (one
verification process) judges them. Prints submissions/s, verification tokens/s, the backlog
over time, and workers_per_validator = the validator's verification throughput / one worker's
generation throughput (tokens/s each, measured in this run). Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import tempfile
import threading
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from deploy.anvil import dev_accounts, start_anvil
from deploy.contracts import deploy_contracts
from deploy.kubo_node import KuboNode
from deploy.pool_cli import PoolConfig, create_pool
from ledger_client.chain.ledger import Ledger, connect, save_deployment
from ledger_client.chain.queries import get_work
from ledger_client.ipfs.content import publish_run_spec, put_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.pool import WorkStatus
from protocol.rollouts import encode_rollouts
from protocol.runspec import RunSpec, SamplingSpec, VerificationSpec
from protocol.submission import SubmissionBinding, work_id_of
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from trainer.publish import base_checkpoint_digest
from validator.checks import RolloutChecker
from validator.daemon import DaemonConfig, ValidatorDaemon
from worker.policy import Policy
from worker.produce import make_batch

SPEC = RunSpec(
    task={"name": "sort", "seed": 0, "params": {"min_digits": 3, "max_digits": 3}},
    sampling=SamplingSpec(group_size=16, temperature=1.0, max_tokens=64),
    prompts_per_submission=8,
    pool_seed="0x" + "b3" * 32,
    verification=VerificationSpec(toploc_min_exp_matches=125, toploc_max_mant_err_mean=0.03,
                                  toploc_max_mant_err_median=0.0, toploc_mean_excludes_max=True),
)
TOKENS = 10**18


def run(workers: int, files_per_worker: int, console: Console) -> dict:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        anvil = start_anvil(tmp / "anvil.log", accounts=workers + 4)
        kubo_node = KuboNode.start(tmp / "kubo", offline=True)
        try:
            return _run(tmp, anvil, kubo_node, workers, files_per_worker, console)
        finally:
            kubo_node.stop()
            anvil.stop()


def _run(tmp: Path, anvil, kubo_node, n_workers: int, files_per_worker: int, console: Console) -> dict:
    w3 = connect(anvil.rpc_url)
    accounts = dev_accounts(n_workers + 4)
    deployment = deploy_contracts(w3, accounts[0])
    deployments = tmp / "deployments.json"
    save_deployment(deployments, deployment)
    kubo = KuboClient(kubo_node.api_multiaddr)
    # no warm start: an untrained policy rarely emits EOS, so every file carries ~8k tokens
    model, tokenizer = init_policy(SPEC, ModelSpec(hidden=64, layers=2, heads=4), warm_steps=0, warm_lr=0.0)
    base = base_checkpoint_digest(kubo, model.state_dict(), model.config, tokenizer)
    cfg = PoolConfig(trainer=accounts[1].address, validators=[accounts[2].address], min_stake=TOKENS,
                     reward_per_sample=1, slash_amount=TOKENS, bounty_bps=0, challenge_window_s=86_400,
                     reward_lock_s=2 * 86_400, async_level=2, task="0x" + publish_run_spec(kubo, SPEC).hex(),
                     base_checkpoint="0x" + base.hex(), funding=10**24)
    admin = Ledger(w3, deployment, accounts[0])
    admin.token.mint(accounts[1].address, 10**25)
    pool_id = create_pool(Ledger(w3, deployment, accounts[1]), cfg, SPEC)
    worker_ledgers = []
    for acc in accounts[4:]:
        admin.token.mint(acc.address, (files_per_worker + 1) * TOKENS)
        ledger = Ledger(w3, deployment, acc)
        ledger.ensure_allocation(pool_id, files_per_worker * TOKENS)  # every file open at once: slash × files
        ledger.pool.join_pool(pool_id)
        worker_ledgers.append(ledger)

    policy = Policy(0, base, model, tokenizer)
    console.print(f"generating {n_workers}×{files_per_worker} real rollout files…")
    files: list[list[tuple[bytes, int, int]]] = []  # per worker: (bytes, n_samples, completion tokens)
    gen_seconds = gen_tokens = 0.0
    for ledger in worker_ledgers:
        own = []
        for nonce in range(files_per_worker):
            t0 = time.perf_counter()
            binding = SubmissionBinding(chain_id=deployment.chain_id, pool_contract=deployment.compute_pool,
                                        pool_id=pool_id, worker=ledger.address, step=0, nonce=nonce)
            batch = make_batch(policy, SPEC, binding)
            gen_seconds += time.perf_counter() - t0
            tokens = sum(len(s.completion_ids) for s in batch.samples)
            gen_tokens += tokens
            data = encode_rollouts(batch)
            put_object(kubo, data)
            own.append((data, len(batch.samples), tokens))
        files.append(own)
    file_gen_s = gen_seconds / (n_workers * files_per_worker)
    worker_tps = gen_tokens / gen_seconds

    state = tmp / "validator"
    factory = functools.partial(RolloutChecker, anvil.rpc_url, str(deployments), kubo_node.api_multiaddr, pool_id,
                                state / "cache")
    daemon = ValidatorDaemon(Ledger(w3, deployment, accounts[2]),
                             DaemonConfig(pool_id=pool_id, state_dir=state, kubo_api=kubo_node.api_multiaddr,
                                          processes=1, max_in_flight=4, poll_interval_s=0.2), factory)
    stop = threading.Event()
    judged = {"n": 0}

    def validate() -> None:
        while not stop.is_set():
            judged["n"] += daemon.run_once()
            stop.wait(0.2)

    # Warm the checker process (policy fetch and load) before the clock starts.
    daemon._executor.submit(int).result()
    thread = threading.Thread(target=validate, daemon=True)
    thread.start()
    schedule = sorted((i * file_gen_s + (w / n_workers) * file_gen_s, w, i)
                      for w in range(n_workers) for i in range(files_per_worker))
    console.print(f"submitting for {schedule[-1][0]:.0f}s at one worker's pace ({file_gen_s:.2f}s per file) × {n_workers}")
    submitted, backlog_series, work_ids = 0, [], []
    start = time.perf_counter()
    for at, w, i in schedule:
        while time.perf_counter() - start < at:
            time.sleep(0.01)
            _sample(backlog_series, start, submitted, judged)
        data, n_samples, _ = files[w][i]
        digest = hashlib.sha256(data).digest()
        worker_ledgers[w].pool.submit_work(pool_id, 0, i, digest, n_samples)
        work_ids.append(work_id_of(deployment.chain_id, deployment.compute_pool, pool_id, worker_ledgers[w].address, i))
        submitted += 1
    submit_window = time.perf_counter() - start
    drain_deadline = time.perf_counter() + 600
    while judged["n"] < submitted and time.perf_counter() < drain_deadline:
        time.sleep(0.2)
        _sample(backlog_series, start, submitted, judged)
    total = time.perf_counter() - start
    stop.set()
    thread.join(30)
    daemon.close()
    statuses = [get_work(worker_ledgers[0], w).status for w in work_ids]
    verdicts = sum(s != WorkStatus.PENDING for s in statuses)
    verified_tokens = sum(t for own in files for _, _, t in own)
    verify_tps = verified_tokens / total
    return {
        "workers": n_workers,
        "submissions": submitted,
        "verdicts": verdicts,
        "accepted": sum(s == WorkStatus.ACCEPTED for s in statuses),
        "lost": submitted - verdicts,
        "max_backlog": max((b for _, b in backlog_series), default=0),
        "submit_window_s": round(submit_window, 1),
        "total_s": round(total, 1),
        "submissions_per_s": round(submitted / submit_window, 2),
        "verify_tokens_per_s": round(verify_tps, 1),
        "worker_gen_tokens_per_s": round(worker_tps, 1),
        "workers_per_validator": round(verify_tps / worker_tps, 2),
        "backlog": [(round(t, 1), b) for t, b in backlog_series[:: max(1, len(backlog_series) // 20)]],
    }


def _sample(series: list, start: float, submitted: int, judged: dict) -> None:
    now = time.perf_counter() - start
    if not series or now - series[-1][0] >= 1.0:
        series.append((now, submitted - judged["n"]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="8 workers, 2 files each (the CI-sized run)")
    p.add_argument("--workers", type=int)
    p.add_argument("--files-per-worker", type=int)
    args = p.parse_args()
    workers = args.workers or (8 if args.quick else 30)
    files = args.files_per_worker or (2 if args.quick else 4)
    console = Console()
    result = run(workers, files, console)
    table = Table(title="one validator vs N workers (CPU, tiny policy)", show_header=False)
    for k, v in result.items():
        if k != "backlog":
            table.add_row(k, str(v))
    table.add_row("backlog over time (s, files)", " ".join(f"{t}:{b}" for t, b in result["backlog"]))
    console.print(table)
    print(json.dumps({k: v for k, v in result.items() if k != "backlog"}))


if __name__ == "__main__":
    main()
