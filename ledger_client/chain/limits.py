"""Limits of a JSON-RPC provider that the chain client keeps to, as plain numbers: no web3 here, so a command's
parser can show them in `--help` before the chain client loads."""

DEFAULT_PAGE_BLOCKS = 10_000
"""The largest block range of one `eth_getLogs` unless configured: what providers commonly allow."""
