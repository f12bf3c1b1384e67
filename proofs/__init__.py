"""Checks on a completion: TOPLOC proofs, sampling replay, termination, prompt assignment. Pure torch, no I/O."""
