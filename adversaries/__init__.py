"""Adversaries: dishonest workers for the protocol tests and the demo, and the TOPLOC attack builders."""
