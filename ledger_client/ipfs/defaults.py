"""The IPFS client's defaults as plain values: no httpx or pydantic here, so a command's parser can show them in
`--help` before the client loads."""

from typing import Final

DEFAULT_API: Final = "/ip4/127.0.0.1/tcp/5001"
"""Kubo's RPC API on its default port."""
DEFAULT_SHARD_BYTES: Final = 256 << 20
"""The largest safetensors shard `publish_checkpoint` writes unless asked for another size."""
