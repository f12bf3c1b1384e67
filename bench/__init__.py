"""Benchmarks: each prints a human table, then one JSON object as its last line."""
