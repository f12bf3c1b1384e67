"""Where the repository is, for tests at any depth under tests/ (unit/<room>/, integration/, e2e/)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root: the folder of pyproject.toml, examples/, docs/ and every room."""
