"""The worker role: stake, join, sync weights, generate rollouts with proofs, submit."""

from cli.console import console_script

main = console_script("worker.cli")
"""The console scripts (pyproject.toml): Ctrl-C while their modules import exits 130 in one line."""
