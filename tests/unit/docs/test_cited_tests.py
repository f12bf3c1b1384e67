"""Every test the docs cite exists: each `tests/….py` path named in README.md, docs/ (the rule book's "Held by:"
lines among them), the Makefile, pyproject.toml and the project's Python files is a file, and each
`tests/….py::name` names a function or class of that module (issue 48: tests/ mirrors the rooms, so a test
that moves takes its citations with it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.paths import ROOT
from tests.test_architecture import project_files

CITED = re.compile(r"(?<![\w/.])(tests/[\w/]*\.py)(?:::(\w+))?")
GONE = frozenset({
    "tests/test_inference_torch_cuda.py",  # docs/benchmarks.md's first GPU run: since the torch-cuda case of test_gpu_workers
})
"""Modules a record of the past names as they were then, and says are gone."""


def _citing_files() -> list[Path]:
    docs = sorted((ROOT / "docs").rglob("*.md"))
    return [ROOT / "README.md", *docs, ROOT / "Makefile", ROOT / "pyproject.toml",
            *(ROOT / f for f in project_files())]


def _citations() -> list[tuple[str, int, str, str | None]]:
    """(citing file, line, cited path, cited name or None) for every citation."""
    found = []
    for file in _citing_files():
        for number, line in enumerate(file.read_text().splitlines(), 1):
            for match in CITED.finditer(line):
                found.append((str(file.relative_to(ROOT)), number, match.group(1), match.group(2)))
    return found


def _names(path: str) -> set[str]:
    tree = ast.parse((ROOT / path).read_text(), path)
    return {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                      ast.ClassDef))}


def test_every_cited_test_module_and_test_exists() -> None:
    citations = _citations()
    assert sum(file == "docs/protocol.md" for file, *_ in citations) > 50, "the rule book cites its tests"
    missing = [f"{file}:{line}: {path}" for file, line, path, _ in citations if path not in GONE and not (ROOT / path).is_file()]
    assert not missing, "cited test modules that do not exist:\n  " + "\n  ".join(missing)
    unknown = [f"{file}:{line}: {path}::{name}" for file, line, path, name in citations
               if name and path not in GONE and name not in _names(path)]
    assert not unknown, "cited tests that their module does not define:\n  " + "\n  ".join(unknown)
