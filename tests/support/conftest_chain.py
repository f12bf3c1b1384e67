"""pytest fixtures for a real anvil chain with the proofswarm contracts deployed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount
from web3 import Web3

from deploy.anvil import AnvilProcess, dev_accounts, find_anvil, start_anvil
from deploy.contracts import deploy_contracts
from deploy.pools import PoolConfig, create_pool
from ledger_client.chain.errors import LedgerError
from ledger_client.chain.ledger import Deployment, Ledger, connect

TOKENS = 10**18


@dataclass
class Chain:
    """A deployed chain with one funded pool and ledgers for every role."""

    anvil: AnvilProcess
    w3: Web3
    deployment: Deployment
    accounts: list[LocalAccount]
    pool_id: int
    config: PoolConfig

    def ledger(self, index: int) -> Ledger:
        return Ledger(self.w3, self.deployment, self.accounts[index])

    @property
    def owner(self) -> Ledger:
        return self.ledger(1)

    @property
    def trainer(self) -> Ledger:
        return self.ledger(2)

    @property
    def validator(self) -> Ledger:
        return self.ledger(3)

    def worker(self, n: int = 0) -> Ledger:
        return self.ledger(4 + n)

    def submit(self, n: int, digest: bytes, n_samples: int = 8, step: int = 0) -> bytes:
        """Worker n submits `digest` with its next nonce (topping its allocation up to what that needs);
        returns the work id."""
        ledger = self.worker(n)
        ledger.ensure_allocation(self.pool_id, ledger.required_allocation(self.pool_id, self.config.min_stake,
                                                                          self.config.slash_amount))
        nonce = ledger.pool.get_member(self.pool_id, ledger.address).next_nonce
        ledger.pool.submit_work(self.pool_id, step, nonce, digest, n_samples)
        return bytes(ledger.pool.work_id_of(self.pool_id, ledger.address, nonce))

    def rpc(self, method: str, params: list) -> dict:
        return self.w3.provider.make_request(method, params)


def pool_config(accounts: list[LocalAccount], **overrides) -> PoolConfig:
    values = dict(trainer=accounts[2].address, validators=[accounts[3].address], min_stake=100 * TOKENS,
                  reward_per_sample=TOKENS, slash_amount=50 * TOKENS, bounty_bps=2_000, challenge_window_s=60,
                  reward_lock_s=120, async_level=2, task="test/task", base_checkpoint="0x" + "11" * 32,
                  max_samples_per_work=64, funding=10_000 * TOKENS)
    values.update(overrides)
    return PoolConfig(**values)


@pytest.fixture
def anvil(tmp_path: Path) -> Iterator[AnvilProcess]:
    """A fresh anvil on a free loopback port."""
    try:
        find_anvil()
    except LedgerError as exc:
        pytest.skip(f"real anvil needed: {exc}")
    proc = start_anvil(tmp_path / "anvil.log")
    yield proc
    proc.stop()


@pytest.fixture
def chain(anvil: AnvilProcess) -> Chain:
    """Contracts deployed, tokens minted to owner and workers, one funded pool; workers 0-1 staked, their
    minimum stake allocated to the pool, and joined."""
    w3 = connect(anvil.rpc_url, 31337)
    accounts = dev_accounts(10)
    deployment = deploy_contracts(w3, accounts[0], treasury=accounts[9].address)
    admin = Ledger(w3, deployment, accounts[0])
    for i in (1, 4, 5, 6):
        admin.token.mint(accounts[i].address, 1_000_000 * TOKENS)
    cfg = pool_config(accounts)
    pool_id = create_pool(Ledger(w3, deployment, accounts[1]), cfg)
    chain = Chain(anvil, w3, deployment, accounts, pool_id, cfg)
    for n in (0, 1):
        worker = chain.worker(n)
        worker.ensure_allocation(pool_id, cfg.min_stake)
        worker.pool.join_pool(pool_id)
    return chain
