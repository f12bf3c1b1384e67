"""Connecting to a chain, the deployments file, and the `Ledger` facade every role uses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import requests
from eth_account.signers.local import LocalAccount
from pydantic import BaseModel, ValidationError
from web3 import HTTPProvider, Web3
from web3.types import RPCEndpoint

from ledger_client.chain.bindings import (
    ComputePool,
    DevStakeToken,
    ForcedErrors,
    StakeManager,
    ValidatorCourt,
    WorkBatches,
)
from ledger_client.chain.errors import BadRpcUrl, InsufficientTokens, LedgerError, NotDeployed, RpcUnreachable, WrongChain
from ledger_client.chain.logs import DEFAULT_PAGE_BLOCKS, LogReader
from ledger_client.chain.transport import KeepAliveHTTPProvider
from ledger_client.chain.tx import TxSender
from protocol.phases import ROLE_ENV


RPC_LOG_ENV = "PROOFSWARM_RPC_LOG"
"""When set to a path, every JSON-RPC request a role sends appends `{"role", "rpc"}` to it, and calls and estimates
their function's `selector` (bench.protocol's `--rpc-census`; the role is protocol.phases' PROOFSWARM_PHASE_ROLE,
else the process id). Off by default."""


def _log_requests(provider: HTTPProvider, path: str) -> None:
    """Append one line per request to `path` (the node's cached chain id is not a request and is not counted)."""
    role = os.environ.get(ROLE_ENV) or str(os.getpid())
    send = provider.make_request

    def make_request(method: RPCEndpoint, params: object) -> object:
        if method != "eth_chainId":
            record = {"role": role, "rpc": method}
            if method in ("eth_call", "eth_estimateGas") and isinstance(params, (list, tuple)) and params \
                    and isinstance(params[0], dict):
                record["selector"] = str(params[0].get("data") or params[0].get("input") or "")[:10]
            with open(path, "a") as log:
                log.write(json.dumps(record) + "\n")
        return send(method, params)

    provider.make_request = make_request  # type: ignore[method-assign]


def connect(rpc_url: str, expected_chain_id: int | None = None, timeout: float = 10.0) -> Web3:
    """A Web3 for `rpc_url`; raises RpcUnreachable or WrongChain with a one-line message."""
    if not rpc_url.startswith(("http://", "https://")):
        raise BadRpcUrl(f"RPC URL {rpc_url!r} must start with http:// or https://")
    # web3's validation asks the node for its chain id before every call, estimate and send (half of a worker's
    # round trips): the id of one endpoint does not change, so it is asked once and kept
    try:
        provider = KeepAliveHTTPProvider(rpc_url, timeout=timeout, cache_allowed_requests=True,
                                         cacheable_requests={RPCEndpoint("eth_chainId")})
    except ValueError as exc:
        raise BadRpcUrl(str(exc)) from None
    w3 = Web3(provider)
    if os.environ.get(RPC_LOG_ENV):
        _log_requests(w3.provider, os.environ[RPC_LOG_ENV])
    try:
        chain_id = w3.eth.chain_id
    except (requests.ConnectionError, requests.Timeout, OSError):
        raise RpcUnreachable(f"cannot reach the Ethereum RPC at {rpc_url}") from None
    except Exception as exc:
        raise RpcUnreachable(f"{rpc_url} does not answer as an Ethereum RPC ({exc.__class__.__name__})") from None
    if expected_chain_id is not None and chain_id != expected_chain_id:
        raise WrongChain(f"{rpc_url} serves chain id {chain_id}, expected {expected_chain_id}")
    return w3


class Deployment(BaseModel):
    """Addresses of one deployment of the proofswarm contracts."""

    chain_id: int
    token: str
    stake_manager: str
    compute_pool: str
    validator_court: str | None = None
    """The ValidatorCourt (bonded validators and disputes); None in deployments made before it existed."""
    forced_errors: str | None = None
    """The ForcedErrors contract beside the court (committed hash chains, forced errors: docs/protocol.md R9.25–R9.29);
    None in deployments made before it existed."""
    work_batches: str | None = None
    """The WorkBatches contract beside the ComputePool (permissioned pools' batched settlement: docs/protocol.md
    R3.7–R3.13); None in deployments made before it existed."""
    deployer: str
    block: int
    dev_token: bool = False


def load_deployment(path: str | Path, chain_id: int) -> Deployment:
    """The deployment for `chain_id` from a deployments file (a JSON object keyed by chain id)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise NotDeployed(f"deployments file {path} does not exist (run `devnet up` or `devnet deploy`)") from None
    except (OSError, json.JSONDecodeError):
        raise NotDeployed(f"deployments file {path} is not valid JSON") from None
    if str(chain_id) not in doc:
        raise NotDeployed(f"deployments file {path} has no deployment for chain id {chain_id}")
    try:
        return Deployment.model_validate(doc[str(chain_id)])
    except ValidationError as exc:
        raise NotDeployed(f"deployments file {path}: bad entry for chain {chain_id} ({exc.error_count()} errors)") from None


def save_deployment(path: str | Path, deployment: Deployment) -> None:
    """Add or replace the entry for the deployment's chain id; written atomically."""
    path = Path(path)
    doc = {}
    if path.exists():
        try:
            doc = json.loads(path.read_text())
        except json.JSONDecodeError:
            raise LedgerError(f"deployments file {path} is corrupt; refusing to overwrite it") from None
    doc[str(deployment.chain_id)] = deployment.model_dump()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)


def allocation_required(open_works: int, min_stake: int, slash_amount: int) -> int:
    """What `submitWork` requires allocated for a member's next submission: max(minStake, (open works + 1) ×
    slashAmount)."""
    return max(min_stake, (open_works + 1) * slash_amount)


class Ledger:
    """The proofswarm contracts on one chain, optionally with a key to send transactions. Its `logs` reads every
    event log in pages of at most `logs_page_blocks` blocks (ledger_client.chain.logs)."""

    def __init__(self, w3: Web3, deployment: Deployment, account: LocalAccount | None = None,
                 logs_page_blocks: int = DEFAULT_PAGE_BLOCKS):
        self.w3 = w3
        self.logs = LogReader(w3, logs_page_blocks)
        self.deployment = deployment
        self.account = account
        self.sender = TxSender(w3, account) if account is not None else None
        for name, addr in (("token", deployment.token), ("stake manager", deployment.stake_manager),
                           ("compute pool", deployment.compute_pool)):
            if w3.eth.get_code(Web3.to_checksum_address(addr)) in (b"", None):
                raise NotDeployed(f"no {name} contract at {addr} on chain {deployment.chain_id}")
        self.token = DevStakeToken(w3, deployment.token, self.sender)
        self.stake = StakeManager(w3, deployment.stake_manager, self.sender)
        self.pool = ComputePool(w3, deployment.compute_pool, self.sender)
        self.court = ValidatorCourt(w3, deployment.validator_court, self.sender) if deployment.validator_court else None
        self.forced_errors = ForcedErrors(w3, deployment.forced_errors, self.sender) if deployment.forced_errors else None
        self.batches = WorkBatches(w3, deployment.work_batches, self.sender) if deployment.work_batches else None

    @classmethod
    def open(cls, rpc_url: str, deployments: str | Path, account: LocalAccount | None = None,
             expected_chain_id: int | None = None, logs_page_blocks: int = DEFAULT_PAGE_BLOCKS) -> "Ledger":
        """Connect to `rpc_url` and bind the deployment recorded for its chain id."""
        w3 = connect(rpc_url, expected_chain_id)
        return cls(w3, load_deployment(deployments, w3.eth.chain_id), account, logs_page_blocks)

    @property
    def address(self) -> str:
        if self.account is None:
            raise LedgerError("no key configured")
        return self.account.address

    def ensure_stake(self, amount: int) -> None:
        """Approve and bond so that the account has at least `amount` bonded."""
        bonded = self.stake.bonded_of(self.address)
        if bonded >= amount:
            return
        need = amount - bonded
        balance = self.token.balance_of(self.address)
        if balance < need:
            raise InsufficientTokens(f"{self.address} has {balance} stake tokens, needs {need} more to bond {amount}")
        if self.token.allowance(self.address, self.stake.address) < need:
            self.token.approve(self.stake.address, need)
        self.stake.bond(need)

    def ensure_allocation(self, pool_id: int, amount: int) -> int:
        """Bond (if needed) and allocate so that at least `amount` of the account's stake is allocated to
        `pool_id`; returns what was added."""
        allocation = self.pool.get_member(pool_id, self.address).allocation
        if allocation >= amount:
            return 0
        need = amount - allocation
        self.ensure_stake(need)
        self.pool.allocate(pool_id, need)
        return need

    def required_allocation(self, pool_id: int, min_stake: int, slash_amount: int) -> int:
        """What `submitWork` requires allocated for the account's next submission to the pool."""
        return allocation_required(self.pool.get_member(pool_id, self.address).open_works, min_stake, slash_amount)
