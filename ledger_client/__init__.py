"""The clients that talk to the chain (chain/) or to IPFS (ipfs/); they import only `protocol`."""
