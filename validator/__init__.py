"""The validator role: check every submission and attest or challenge it."""

from cli.console import console_script

main = console_script("validator.cli")
"""The console scripts (pyproject.toml): Ctrl-C while their modules import exits 130 in one line."""
