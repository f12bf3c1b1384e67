"""Local devnet (anvil + Kubo + contracts), deployments and pool configuration."""

from cli.console import console_script

devnet_command = console_script("deploy.cli")
pool_command = console_script("deploy.pool_cli")
checkpoint_command = console_script("deploy.checkpoint_cli")
"""The console scripts (pyproject.toml): Ctrl-C while their modules import exits 130 in one line."""
