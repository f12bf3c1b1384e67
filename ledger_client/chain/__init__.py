"""The chain: typed contract bindings, transactions, custom-error decoding, reorg-safe event cursors, keys."""
