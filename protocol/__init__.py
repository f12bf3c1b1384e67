"""What every participant of a pool shares, typed once: the run spec, the rollout-file codec, the checkpoint
manifest schema, verdict reasons, the pool's on-chain state, the digest type, and the error for input a person must fix
(`errors.InvalidInput`)."""
