"""The clients that talk to the chain (chain/) or to IPFS (ipfs/), and the CLI plumbing every command shares."""
