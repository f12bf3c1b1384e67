"""A pool on a fresh anvil whose run spec and base checkpoint are real IPFS objects, with the worker and
validator daemons of it (shared by the whole-protocol tests)."""

from __future__ import annotations

import contextlib
import functools
import io
import json
from pathlib import Path

from deploy.anvil import dev_accounts, start_anvil
from deploy.contracts import deploy_contracts
from deploy.pools import create_pool
from inference.policy import PolicyLoader
from ledger_client.chain.ledger import Ledger, connect, save_deployment
from ledger_client.ipfs.content import fetch_run_spec
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import Digest, hex_text
from protocol.runspec import RunSpec
from tests.support.conftest_chain import TOKENS, pool_config
from trainer.main import main as trainer_main
from validator.checks import RolloutChecker
from validator.config import DaemonConfig
from validator.daemon import ValidatorDaemon
from worker.daemon import WorkerDaemon, WorkerOptions
from worker.produce import produce_rollout_file


class ProtocolPool:
    """anvil with the contracts deployed and tokens minted to the owner (1) and workers (4-6), a Kubo client;
    `create(...)` then makes the pool. Accounts: 2 is the trainer, 3 the validator."""

    def __init__(self, tmp: Path, kubo_node):
        self.tmp = tmp
        self.anvil = start_anvil(tmp / "anvil.log")
        self.w3 = connect(self.anvil.rpc_url, 31337)
        self.accounts = dev_accounts(10)
        self.deployment = deploy_contracts(self.w3, self.accounts[0])
        admin = self.ledger(0)
        for i in (1, 4, 5, 6):
            admin.token.mint(self.accounts[i].address, 1_000_000 * TOKENS)
        self.kubo_api = kubo_node.api_multiaddr
        self.kubo = KuboClient(self.kubo_api)
        self.deployments = tmp / "deployments.json"
        save_deployment(self.deployments, self.deployment)

    def create(self, spec: RunSpec, task_ref: bytes, base_checkpoint: bytes, **overrides) -> int:
        """The pool of `spec` (added to IPFS as `task_ref`) starting from `base_checkpoint` (PoolConfig `overrides`,
        e.g. a `batches` table); returns its id."""
        self.config = pool_config(self.accounts, task=hex_text(task_ref), base_checkpoint=hex_text(base_checkpoint),
                                  challenge_window_s=3600, reward_lock_s=7200, max_samples_per_work=None,
                                  **overrides)
        self.pool_id = create_pool(self.ledger(1), self.config, spec)  # maxSamplesPerWork from the run spec
        return self.pool_id

    def create_by_trainer_init(self, run_spec: Path, *init_args: str) -> RunSpec:
        """`trainer init --run-spec RUN_SPEC INIT_ARGS…` on this Kubo, then the pool of the run spec and base
        checkpoint it published; returns the run spec as fetched from IPFS (what init printed: `init_output`)."""
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert trainer_main(["init", "--json", "--run-spec", str(run_spec), "--kubo-api", self.kubo_api,
                                 *init_args]) == 0
        init = self.init_output = json.loads(printed.getvalue().strip().splitlines()[-1])
        task_ref, base = Digest.parse(init["task"]), Digest.parse(init["base_checkpoint"])
        spec = fetch_run_spec(self.kubo, task_ref)
        self.create(spec, bytes(task_ref), bytes(base))
        return spec

    def ledger(self, i: int) -> Ledger:
        return Ledger(self.w3, self.deployment, self.accounts[i])

    def worker(self, i: int, producer=produce_rollout_file, upload=None, per_step: int = 1, **options) -> WorkerDaemon:
        """Worker i's daemon, prepared (WorkerOptions `options` besides)."""
        opts = WorkerOptions(pool_id=self.pool_id, kubo_api=self.kubo_api, work_dir=self.tmp / f"worker{i}",
                             submissions_per_step=per_step, max_pending=per_step, **options)
        kwargs = {"upload": upload} if upload else {}
        daemon = WorkerDaemon(self.ledger(i), opts, producer, PolicyLoader(), **kwargs)
        daemon.prepare()
        return daemon

    def validator(self, name: str = "validator", checker=RolloutChecker, **config) -> ValidatorDaemon:
        """A validator daemon of the pool; `checker` (a RolloutChecker subclass) and DaemonConfig overrides."""
        state = self.tmp / name
        factory = functools.partial(checker, self.anvil.rpc_url, str(self.deployments), self.kubo_api,
                                    self.pool_id, state / "cache")
        # one fetch attempt (a withheld file is challenged in the poll that finds it), with time for a loaded
        # machine's Kubo to serve a file that is there (3 s, 4 xdist workers on 2 cores: too little to count on)
        options = {"fetch_timeout_s": 10.0, "fetch_attempts": 1, **config}
        return ValidatorDaemon(self.ledger(3), DaemonConfig(pool_id=self.pool_id, state_dir=state,
                                                            kubo_api=self.kubo_api, **options), factory)

    def close(self) -> None:
        self.kubo.close()
        self.anvil.stop()
