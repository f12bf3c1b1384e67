"""The rooms and who may import whom (docs/architecture.md, "Rooms"), read from the code itself.

Every import of every .py file of the project's rooms — absolute and relative, at module level, inside functions
and under `if TYPE_CHECKING:` alike — is parsed with `ast` (nothing is imported) and held to the table below, room
by room; the table is the docs' room table as data, and the two must agree. Every top-level folder of the project
is a room of the table, so a new room is declared before it is used. No module imports itself through others:
the graph of module-to-module imports has no cycle. The unit tier (tests/unit/) starts no service: none of its
modules imports, itself or through the test modules it imports, what starts anvil or Kubo, nor asks for their
fixtures; and every test module lives in a tier (unit/<room>/, integration/, e2e/), every helper in support/.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ROLES = frozenset({"worker", "validator", "trainer"})
BELOW_ROLES = frozenset({"cli", "ledger_client", "protocol", "proofs", "tasks", "inference"})
"""The shared rooms a role builds on: what two roles need moves down into one of them."""
ROOMS = frozenset({
    *ROLES, *BELOW_ROLES, "adversaries", "dashboard", "deploy", "bench", "examples", "tests", "contracts",
    "environments", "docs", "scripts",
})
ANYTHING = ROOMS

MAY_IMPORT: dict[str, frozenset[str]] = {
    # the shared rooms, lowest first
    "proofs": frozenset(),
    "tasks": frozenset(),
    "protocol": frozenset({"tasks", "proofs"}),
    "ledger_client": frozenset({"protocol"}),
    "inference": frozenset({"proofs", "protocol"}),
    "cli": frozenset({"ledger_client", "protocol"}),
    # the roles (never each other, nor anything above them), the explorer, the deploy tools, the attacks
    "worker": frozenset({"cli", "ledger_client", "inference", "proofs", "tasks", "protocol"}),
    "validator": frozenset({"cli", "ledger_client", "inference", "proofs", "tasks", "protocol"}),
    "trainer": frozenset({"cli", "ledger_client", "inference", "tasks", "protocol"}),
    "dashboard": frozenset({"cli", "ledger_client", "protocol"}),
    "deploy": frozenset({"cli", "ledger_client", "protocol"}),
    "adversaries": BELOW_ROLES | {"worker", "validator"},  # an adversary is an honest role with one change
    # outside the product
    "examples": ANYTHING,
    "bench": ANYTHING,
    "tests": ANYTHING,
    # no room: Solidity (OpenZeppelin), installable environments (verifiers), pages, shell scripts
    "contracts": frozenset(),
    "environments": frozenset(),
    "docs": frozenset(),
    "scripts": frozenset(),
}
"""Room → the other rooms its modules may import (its own always). Mirrors docs/architecture.md's room table."""

@cache
def _gitignore() -> tuple[str, ...]:
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return tuple(line.strip().rstrip("/") for line in lines if line.strip() and not line.startswith("#"))


def _ignored(rel: Path) -> bool:
    """Whether a path (relative to ROOT) is no source of the project's: hidden, a cache, or git-ignored (a pattern
    without a slash matches a name at any depth, one with a slash the path from the root)."""
    for depth, name in enumerate(rel.parts, 1):
        prefix = "/".join(rel.parts[:depth])
        if name.startswith(".") or name == "__pycache__" or any(
                fnmatch.fnmatch(prefix if "/" in pattern else name, pattern.lstrip("/")) for pattern in _gitignore()):
            return True
    return False


@cache
def top_level_folders() -> frozenset[str]:
    return frozenset(p.name for p in ROOT.iterdir() if p.is_dir() and not _ignored(Path(p.name)))


@dataclass(frozen=True)
class Import:
    file: Path  # relative to ROOT
    line: int
    source: str  # the importing module, dotted
    target: str  # the imported module (or the module a name is imported from), dotted
    text: str  # the statement as written

    @property
    def arrow(self) -> tuple[str, str]:
        return self.source.split(".")[0], self.target.split(".")[0]

    def __str__(self) -> str:
        source, target = self.arrow
        return f"{self.file}:{self.line}: {source} → {target} ({self.text})"


def _module_name(file: Path) -> tuple[str, list[str]]:
    """The dotted name of a file's module, and the package its relative imports start from."""
    parts = list(file.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), parts
    return ".".join(parts), parts[:-1]


@cache
def project_files() -> tuple[Path, ...]:
    """Every .py file of every room, relative to ROOT (git-ignored folders, e.g. contracts/out, left out)."""
    return tuple(rel for room in sorted(top_level_folders()) for path in sorted((ROOT / room).rglob("*.py"))
                 if not _ignored(rel := path.relative_to(ROOT)))


@cache
def project_modules() -> frozenset[str]:
    return frozenset(_module_name(f)[0] for f in project_files())


def imports_in(file: Path, text: str) -> list[Import]:
    """The imports of one file (relative to ROOT), one entry per module each statement names (`import a, b`: two)."""
    source, package = _module_name(file)
    modules = project_modules()
    lines = text.splitlines()
    found = []
    for node in ast.walk(ast.parse(text, str(file))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                base_name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                base_name = node.module or ""
            # `from pkg import mod` imports the module pkg.mod; `from mod import name`, the module mod
            targets = [f"{base_name}.{a.name}" if f"{base_name}.{a.name}" in modules else base_name for a in node.names]
        else:
            continue
        statement = " ".join(line.strip() for line in lines[node.lineno - 1:node.end_lineno])
        for target in dict.fromkeys(targets):
            found.append(Import(file, node.lineno, source, target, statement.replace("( ", "(").replace(", )", ")")))
    return found


@cache
def imports() -> tuple[Import, ...]:
    """Every import of the project."""
    return tuple(imp for file in project_files() for imp in imports_in(file, (ROOT / file).read_text()))


def _room_of(module: str) -> str | None:
    top = module.split(".")[0]
    return top if top in top_level_folders() or top in MAY_IMPORT else None


def forbidden_imports() -> list[Import]:
    bad = []
    for imp in imports():
        source, target = imp.arrow
        if _room_of(imp.target) is None or target == source:
            continue  # another project's module (torch, web3, verifiers …), or the room's own
        if target not in MAY_IMPORT.get(source, frozenset()):
            bad.append(imp)
    return bad


def test_every_top_level_folder_is_a_room_of_the_table() -> None:
    """A new top-level folder is declared (here and in docs/architecture.md) before it is used; every room of the
    table exists."""
    undeclared = sorted(top_level_folders() - MAY_IMPORT.keys())
    assert not undeclared, (f"top-level folder(s) {undeclared} are no room of tests/test_architecture.py's MAY_IMPORT "
                            "nor of docs/architecture.md's room table: declare what they may import")
    missing = sorted(MAY_IMPORT.keys() - top_level_folders())
    assert not missing, f"rooms {missing} of the table have no folder"
    assert all(MAY_IMPORT[room] <= ROOMS for room in MAY_IMPORT)


def _docs_table() -> dict[str, frozenset[str]]:
    """docs/architecture.md's room table as data: `room/…` → the rooms its "imports" cell names ("anything",
    "anything below the roles", or a list; names of other projects such as OpenZeppelin are not rooms)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("\n## Rooms\n", 1)[1].split("\n## ", 1)[0]
    table: dict[str, set[str]] = defaultdict(set)
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.match(r"`([a-z_]+)/", cells[0])  # `ledger_client/chain/` is a part of the room ledger_client
        if not match:
            continue
        room, allowed = match.group(1), cells[-1].lower()
        if allowed.startswith("anything below the roles"):
            table[room] |= BELOW_ROLES
        elif allowed == "anything":
            table[room] |= ANYTHING
        else:
            table[room] |= set(re.findall(r"[a-z_]+", allowed)) & ROOMS
    return {room: frozenset(allowed) for room, allowed in table.items()}


def test_the_table_is_the_one_in_docs_architecture() -> None:
    docs = _docs_table()
    assert docs.keys() == MAY_IMPORT.keys(), (
        f"rooms only in docs/architecture.md: {sorted(docs.keys() - MAY_IMPORT.keys())}; "
        f"only in MAY_IMPORT: {sorted(MAY_IMPORT.keys() - docs.keys())}")
    differ = {room: (sorted(docs[room]), sorted(MAY_IMPORT[room])) for room in docs if docs[room] != MAY_IMPORT[room]}
    assert not differ, f"room: (docs/architecture.md, MAY_IMPORT) disagree: {differ}"


def test_the_reader_sees_every_kind_of_import() -> None:
    """Absolute and relative imports, of modules and of names, at module level, under TYPE_CHECKING and inside
    functions: each is an arrow to the module it names."""
    text = """
from typing import TYPE_CHECKING
import ledger_client.chain.ledger, tasks
from . import journal
from .produce import backend_of
if TYPE_CHECKING:
    from inference.policy import Policy
def late():
    from validator import checks
"""
    found = [(imp.line, imp.arrow, imp.target) for imp in imports_in(Path("worker/daemon.py"), text)]
    assert found == [
        (2, ("worker", "typing"), "typing"),
        (3, ("worker", "ledger_client"), "ledger_client.chain.ledger"), (3, ("worker", "tasks"), "tasks"),
        (4, ("worker", "worker"), "worker.journal"),
        (5, ("worker", "worker"), "worker.produce"),
        (7, ("worker", "inference"), "inference.policy"),
        (9, ("worker", "validator"), "validator.checks"),
    ], found
    assert [imp.target for imp in imports_in(Path("worker/__init__.py"), "from . import journal")] == ["worker.journal"]
    assert {"cli", "ledger_client", "worker", "tests"} <= {file.parts[0] for file in project_files()}


def test_every_room_imports_only_what_the_table_allows() -> None:
    """Roles never import each other (nor deploy, dashboard, bench, examples or tests); proofs/ and tasks/ import no
    room; ledger_client/ only protocol/; protocol/ only tasks/ and proofs/; inference/ only proofs/ and protocol/;
    cli/ only ledger_client/ and protocol/ (its exit table needs no error class of proofs, tasks or inference)."""
    bad = forbidden_imports()
    allowed = lambda room: ", ".join(sorted(MAY_IMPORT.get(room, ()))) or "no other room"  # noqa: E731
    assert not bad, "forbidden imports (docs/architecture.md, Rooms):\n" + "\n".join(
        f"  {imp}; {imp.arrow[0]} may import only {allowed(imp.arrow[0])}" for imp in bad)


def test_no_module_imports_itself_through_others() -> None:
    """No import cycle between the project's modules, function-level imports included (a cycle that only works
    because one side imports late is still a cycle: move the shared part down)."""
    modules = project_modules()
    imported: dict[str, set[str]] = defaultdict(set)
    where: dict[tuple[str, str], Import] = {}
    for imp in imports():
        target = imp.target
        while target and target not in modules:
            target = target.rpartition(".")[0]  # `import a.b.name`: the module a.b
        if target and target != imp.source:
            imported[imp.source].add(target)
            where.setdefault((imp.source, target), imp)
    try:
        TopologicalSorter(imported).prepare()
    except CycleError as exc:
        cycle = exc.args[1]  # each module is imported by the next
        arrows = [where[(importer, module)] for module, importer in zip(cycle, cycle[1:])]
        raise AssertionError("import cycle: " + " ↔ ".join(cycle[:-1]) + "".join(
            f"\n  {imp.file}:{imp.line}: {imp.source} → {imp.target} ({imp.text})" for imp in arrows)) from None


SERVICE_MODULES = frozenset({
    "tests.support.conftest_chain", "tests.support.conftest_kubo", "tests.support.court_pool",
    "tests.support.court_scenario", "tests.support.protocol_pool",
    "deploy.anvil", "deploy.kubo_node", "deploy.devnet", "deploy.contracts",
})
"""What starts anvil or Kubo (or deploys onto a chain): no module of tests/unit/ may import them."""
SERVICE_FIXTURES = frozenset({"anvil", "chain", "kubo_node", "kubo", "kubo_swarm", "court_pool"})
"""The fixtures of tests/support/conftest_chain.py, conftest_kubo.py and court_pool.py: a real chain or Kubo."""
UNIT = Path("tests/unit")


def _reached(module: str, by_source: dict[str, list[Import]]) -> dict[str, Import]:
    """Every module a module imports, followed through the test modules (tests.*) it imports: target → the import
    that first reached it."""
    reached: dict[str, Import] = {}
    todo = [module]
    while todo:
        for imp in by_source.get(todo.pop(), ()):
            if imp.target in reached:
                continue
            reached[imp.target] = imp
            if imp.target.startswith("tests.") and imp.target in by_source:
                todo.append(imp.target)
    return reached


def test_the_unit_tier_starts_no_service() -> None:
    """tests/unit/ (`make test-unit`) runs without anvil or Kubo: its modules import none of what starts them, also
    not through the test modules they import, and none of its tests or fixtures asks for a chain or Kubo fixture
    (a module may define a fixture of that name for itself)."""
    by_source: dict[str, list[Import]] = defaultdict(list)
    for imp in imports():
        by_source[imp.source].append(imp)
    unit_files = [file for file in project_files() if file.is_relative_to(UNIT)]
    assert sum(file.name.startswith("test_") for file in unit_files) > 20, "tests/unit/ is where the unit tier lives"
    bad = []
    for file in unit_files:
        module = _module_name(file)[0]
        for target, imp in _reached(module, by_source).items():
            if any(target == s or target.startswith(s + ".") for s in SERVICE_MODULES):
                bad.append(f"{file}: imports {target} ({imp})")
        tree = ast.parse((ROOT / file).read_text(), str(file))
        functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
        fixtures = {f.name for f in functions if any("fixture" in ast.unparse(d) for d in f.decorator_list)}
        for f in functions:
            if f.name.startswith("test") or f.name in fixtures:
                asked = {a.arg for a in [*f.args.posonlyargs, *f.args.args, *f.args.kwonlyargs]}
                bad += [f"{file}:{f.lineno}: {f.name} asks for the fixture {name}"
                        for name in sorted((asked & SERVICE_FIXTURES) - fixtures)]
    assert not bad, ("the unit tier starts no anvil or Kubo: move these modules to tests/integration/ or "
                     "tests/e2e/\n  " + "\n  ".join(bad))


def test_every_test_module_lives_in_a_tier() -> None:
    """tests/ mirrors the rooms (docs/architecture.md): a test module lives in tests/unit/<room>/ (a room of the
    table), tests/integration/ or tests/e2e/; helpers in tests/support/; at the top only tests/conftest.py and this
    module."""
    top = {"tests/__init__.py", "tests/conftest.py", "tests/test_architecture.py"}
    misplaced = []
    for file in project_files():
        if file.parts[0] != "tests" or str(file) in top:
            continue
        tier, rest = file.parts[1], file.parts[2:]
        if tier == "unit" and (len(rest) == 1 and rest[0] == "__init__.py" or len(rest) == 2 and rest[0] in ROOMS):
            continue
        if tier in ("integration", "e2e") and len(rest) == 1:
            continue
        if tier == "support" and len(rest) == 1 and not rest[0].startswith("test_"):
            continue
        misplaced.append(str(file))
    assert not misplaced, ("test modules go to tests/unit/<room>/ (no anvil, no Kubo, part of make test-unit's "
                           "minute), tests/integration/ or tests/e2e/, helpers to tests/support/: " + ", ".join(misplaced))
