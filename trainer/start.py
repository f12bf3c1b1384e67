"""`trainer start`: GRPO on the work the ledger accepts, publishing every policy on IPFS and on-chain.

The pool is the single source of truth: the task, group size, temperature and max tokens come
from its run spec (taskRef), the async level from its max staleness, and the initial policy is
its base checkpoint (step 0), fetched from IPFS and verified. Rollouts come only from the
ledger-gated source (accepted work, each exactly once across restarts); each new policy is
published with `publishCheckpoint` by the pool's trainer key. In an exact pool a policy exact mode cannot run
(past its bounds, docs/protocol.md R5.8) is never published: the trainer stops at that step with one line.

With `--nproc N` every rank reads the pool and loads the base policy; rank 0 alone reads the
accepted work (and broadcasts it), publishes and reports (trainer/distributed.py).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import signal
from pathlib import Path

import torch

from cli.console import raise_terminated
from cli.devnet import load_devnet_info
from cli.errors import UsageError
from cli.options import (
    configure_logging,
    load_settings,
    resolve_chain_args,
    use_devnet_role_key,
)
from inference.policy import load_policy
from ledger_client.chain.keys import load_account
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import pool_state
from ledger_client.ipfs.checkpoints import fetch_checkpoint
from ledger_client.ipfs.content import fetch_run_spec
from ledger_client.ipfs.kubo import KuboClient
from protocol.manifest import PolicyVerification
from protocol.rescoring import misscored_samples
from protocol.runspec import RunSpec, RunSpecFileError, load_policy_verification, usable_task
from tasks.registry import build_task
from trainer.checkpoint import TrainerStateError
from trainer.config import TrainerConfig
from trainer.distributed import Distributed, launched_by_torchrun, quiet_followers, rank_device
from trainer.evaluate import greedy_accuracy
from trainer.consumed_log import FollowerLog
from trainer.exact_behaviour import ExactBehaviour
from trainer.ledger_source import MIN_POLL_INTERVAL_S, LedgerSource
from trainer.loop import Trainer, TrainerStarved, UnpublishablePolicy
from trainer.metrics import TrainerMetrics
from trainer.parallel import SingleProcess
from trainer.publish import IpfsPublisher, exact_policy_problem

log = logging.getLogger("proofswarm.trainer")


class PolicyVerificationFile:
    """`--policy-verification`: the file's tolerances, read at start (a bad file refuses the start) and again
    before each publish; a file that turns bad later keeps the last good values, with an error logged."""

    def __init__(self, path: Path, spec: RunSpec):
        self.path, self.spec = path, spec
        try:
            self.last = load_policy_verification(path, spec)
        except RunSpecFileError as exc:
            raise UsageError(str(exc)) from None

    def __call__(self) -> PolicyVerification:
        try:
            self.last = load_policy_verification(self.path, self.spec)
        except RunSpecFileError as exc:
            log.error("%s; publishing with the tolerances read before", exc)
        return self.last


def run_start(args: argparse.Namespace) -> int:
    configure_logging(args)  # what the trainer waits for, files it cannot fetch, overturned work
    rpc_url, deployments = resolve_chain_args(args)
    devnet = load_devnet_info(args.devnet_dir)
    if args.devnet_trainer:
        use_devnet_role_key(args, "trainer", "--devnet-trainer")
    ledger = Ledger.open(rpc_url, deployments, load_account(args.key, args.keystore, args.password_file),
                         args.chain_id, args.logs_page_blocks)
    pool = pool_state(ledger, args.pool)
    if pool.trainer.lower() != ledger.address.lower():
        raise UsageError(f"{ledger.address} is not the trainer of pool {args.pool} ({pool.trainer})")
    kubo_api = args.kubo_api or (devnet or {}).get("kubo_api")
    if not kubo_api:
        raise UsageError("no --kubo-api given and no devnet is up")
    kubo = KuboClient(kubo_api)
    spec = fetch_run_spec(kubo, pool.task_ref)
    usable_task(spec)  # TaskUnavailable before any download: this machine could not recompute the pool's rewards
    policy_verification = PolicyVerificationFile(args.policy_verification, spec) if args.policy_verification else None

    overrides = [f"--{kv.replace('=', ' ', 1)}" if "=" in kv else kv for kv in args.set]
    argv = [tok for o in overrides for tok in o.split(" ", 1)]
    # the pool decides the task, sampling and async level; checkpoint every step (see Trainer.start)
    config = load_settings(TrainerConfig, args.config, argv, fixed={
        "task": spec.task, "sampling": spec.sampling, "async_level": pool.async_level, "checkpoint_every": 1})

    device = rank_device(args.device)
    parallel = Distributed(config.parallel, device=device) if launched_by_torchrun() else SingleProcess()
    base = fetch_checkpoint(kubo, pool.base_checkpoint, Path(config.run_dir) / "base-checkpoint")
    model, tokenizer = load_policy(base.path)
    if device != "cpu":
        model = model.to(device)
    torch.set_num_threads(1)
    task = build_task(config.task)
    evaluate = (lambda m: {"accuracy": greedy_accuracy(m, tokenizer, task, args.eval_problems, config.sampling.max_tokens)}) \
        if args.eval_every else None
    if not args.wait_final:
        log.warning("--no-wait-final: consuming work at its first accepting verdict, before a dispute can overturn it")
    consumed_path = Path(config.run_dir) / "consumed.json"
    source = LedgerSource(ledger, kubo, args.pool, wait_final=args.wait_final, min_poll_interval_s=MIN_POLL_INTERVAL_S,
                          consumed_log=consumed_path.with_suffix(".log") if parallel.is_main else FollowerLog(),
                          decode_workers=config.decode_workers,
                          rescore=functools.partial(misscored_samples, task, tokenizer))
    publisher = IpfsPublisher(ledger, kubo, args.pool, model.config, tokenizer, pool.async_level,
                              Path(config.run_dir), metrics_of=lambda step: trainer.metrics_at(step),
                              policy_verification=policy_verification) \
        if parallel.is_main else None
    # an exact pool's policies must quantise (R5.8): checked before each is checkpointed and published
    policy_check = (lambda m: exact_policy_problem(spec, m)) if spec.inference == "exact" else None
    trainer = Trainer(config, model, source, publishers=[publisher] if publisher else [], evaluate=evaluate,
                      eval_every=args.eval_every, parallel=parallel, policy_check=policy_check,
                      exact_behaviour=ExactBehaviour(config.sampling.temperature) if spec.inference == "exact" else None)
    signal.signal(signal.SIGTERM, raise_terminated)  # as Ctrl-C, exit 143 (a step in hand is not finished)

    metrics = TrainerMetrics() if parallel.is_main else None
    if metrics is not None and args.metrics_port:
        metrics.serve(args.metrics_port)

    def report(m) -> None:
        if publisher is None:
            return
        metrics.update(m.step, trainer.metrics_at(m.step), len(source.consumed), len(source.overturned))
        reward = None if m.reward is None else round(m.reward, 4)
        line = {"step": m.step, "reward": reward, "consumed": len(source.consumed),
                "consumed_overturned": len(source.overturned),
                "checkpoint": publisher.published.get(m.step), "patch_ratio": _rounded(publisher.patch_ratios.get(m.step))}
        # for audits: how many it learned from (their ids in consumed.log, in order) and the few it refused
        record = {"step": m.step, "consumed": len(source.consumed), "consumed_log": consumed_path.with_suffix(".log").name,
                  "pending": source.pending, "skipped": source.skipped, "unreadable": source.unreadable,
                  "misscored": source.misscored,
                  "unsettled": source.unsettled, "overturned": source.overturned}
        tmp = consumed_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(consumed_path)
        print(json.dumps(line) if args.json else "  ".join(f"{k} {v}" for k, v in line.items()), flush=True)

    with quiet_followers(parallel.is_main, failures=(TrainerStarved, TrainerStateError, UnpublishablePolicy)):
        try:
            trainer.run(on_step=report)
        finally:
            source.close()
    if parallel.is_main:
        (Path(config.run_dir) / "trainer.done").touch()
    return 0


def _rounded(ratio: float | None) -> float | None:
    return None if ratio is None else round(ratio, 4)
