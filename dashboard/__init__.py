"""The pool explorer: a chain + IPFS index in SQLite, a JSON API, /metrics and a web page."""

from cli.console import console_script

main = console_script("dashboard.cli")
"""The console scripts (pyproject.toml): Ctrl-C while their modules import exits 130 in one line."""
