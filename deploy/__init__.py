"""Local devnet (anvil + Kubo + contracts), deployments and pool configuration."""
