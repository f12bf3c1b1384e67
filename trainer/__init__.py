"""GRPO trainer: loss, advantages, filtering, the training loop and intake of work."""

from cli.console import console_script

main = console_script("trainer.main")
"""The console scripts (pyproject.toml): Ctrl-C while their modules import exits 130 in one line."""
