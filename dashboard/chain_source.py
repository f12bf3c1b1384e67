"""Everything the explorer takes from the ledger client (and the command-line shell, cli/), in one place.

The explorer reads the chain (event cursors, live pool/stake state) and IPFS (run specs,
manifests, metrics objects, evidence) only through these names, so a move inside
`ledger_client` touches this file alone.
"""

from __future__ import annotations

from cli.devnet import DEVNET_DIR_HELP, default_devnet_dir, load_devnet_info
from cli.errors import UsageError, one_line_errors
from cli.options import add_chain_args, resolve_chain_args
from ledger_client.chain.bindings import ComputePool, StakeManager, ValidatorCourt
from ledger_client.chain.codegen import snake
from ledger_client.chain.errors import LedgerError, RpcUnreachable
from ledger_client.chain.events import EventCursor, Removed
from ledger_client.chain.queries import ZERO_ADDRESS, decode_pool
from ledger_client.chain.ledger import Deployment, connect, load_deployment
from ledger_client.ipfs.content import ContentError, get_object
from ledger_client.ipfs.kubo import KuboClient, KuboError
from protocol.digest import cid_to_digest, digest_to_cid
from protocol.manifest import parse_manifest
from protocol.pool import WorkStatus
from protocol.verdicts import Reason

__all__ = [
    "DEVNET_DIR_HELP", "ComputePool", "ContentError", "Deployment", "EventCursor", "KuboClient", "KuboError", "LedgerError", "Reason",
    "Removed", "RpcUnreachable", "StakeManager", "ValidatorCourt", "snake", "UsageError", "WorkStatus", "add_chain_args", "cid_to_digest",
    "connect", "decode_pool", "default_devnet_dir", "digest_to_cid", "get_object", "load_deployment", "load_devnet_info", "one_line_errors",
    "parse_manifest", "resolve_chain_args", "ZERO_ADDRESS",
]
