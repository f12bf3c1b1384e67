"""The worker role: stake, join, sync weights, generate rollouts with proofs, submit."""
