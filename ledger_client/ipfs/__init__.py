"""IPFS through a Kubo node: the RPC client, content-addressed objects, checkpoints (publish, fetch, load, retention)."""
