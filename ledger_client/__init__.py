"""Everything that talks to the chain or to IPFS: contract bindings, transactions, event cursors, Kubo, on-wire files."""
