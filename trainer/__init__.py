"""GRPO trainer: loss, advantages, filtering, the training loop and intake of work."""
