"""docs/benchmarks.md's table is what `python -m bench.doc` makes of bench/results/*.json (issue 48): one row per
question, each read from a results file that exists, parses, and names a command that runs something in this
repository (no machine's own paths); the notes each row links to exist. No bench is run here."""

from __future__ import annotations

import datetime
import json
import re
import shlex
from pathlib import Path

from bench import doc
from tests.support.paths import ROOT

REQUIRED = {"bench": str, "profile": (str, type(None)), "command": str, "date": (str, type(None)),
            "commit": (str, type(None)), "machine": str, "provenance": str, "figures": dict}
ENV = re.compile(r"[A-Z_][A-Z0-9_]*=\S*")


def slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading: lower case, punctuation (dashes other than `-` too) dropped, spaces
    to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lstrip("#").strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    fence, out = False, set()
    for line in page.read_text().splitlines():
        fence ^= line.startswith("```")
        if not fence and re.match(r"#{1,6} ", line):
            out.add(slug(line))
    return out


def command_problems(command: str) -> list[str]:
    """What is wrong with a results file's command: a machine's own path, or a program or module this repository
    does not have. Env assignments, `nice -n N` and `time` may precede the program."""
    tokens = shlex.split(command)
    problems = [f"names a machine path: {t}" for t in tokens if t.startswith(("/", "~")) or "=/" in t]
    i = 0
    while i < len(tokens) and ENV.fullmatch(tokens[i]):
        i += 1
    if tokens[i:i + 2] == ["nice", "-n"]:
        i += 3
    if tokens[i:i + 1] == ["time"]:
        i += 1
    program, rest = tokens[i], tokens[i + 1:]
    if program in ("python", "python3", ".venv/bin/python"):
        if "-m" not in rest:
            return problems + ["runs python without -m MODULE"]
        module = rest[rest.index("-m") + 1]
        path = ROOT / module.replace(".", "/")
        if not (path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()):
            problems.append(f"module {module}: no {path.relative_to(ROOT)}.py")
    elif program == "make":
        if not re.search(rf"^{re.escape(rest[0])}:", (ROOT / "Makefile").read_text(), re.M):
            problems.append(f"make target {rest[0]}: not in the Makefile")
    elif not (ROOT / program).is_file():
        problems.append(f"program {program}: not in this repository")
    return problems


def test_the_committed_table_is_the_one_the_results_give() -> None:
    text = doc.DOC.read_text()
    assert doc.splice(text, doc.render(doc.load_results())) == text, \
        "docs/benchmarks.md's table differs from bench/results/: run python -m bench.doc"


def test_every_row_has_a_results_file_and_notes_and_the_table_fits_one_screen() -> None:
    assert len(doc.ROWS) <= doc.ROWS_MAX
    questions = [row.question for row in doc.ROWS]
    assert len(set(questions)) == len(questions), "a question asked twice"
    for row in doc.ROWS:
        assert (doc.RESULTS / row.results).is_file(), f"{row.question}: no bench/results/{row.results}"
        page, _, anchor = row.notes.partition("#")
        assert (ROOT / "docs" / page).is_file(), f"{row.question}: no docs/{page}"
        assert not anchor or anchor in anchors(ROOT / "docs" / page), f"{row.question}: no #{anchor} in docs/{page}"
    for row in doc.ROWS:
        figure = row.figure(json.loads((doc.RESULTS / row.results).read_text()))
        assert 0 < len(figure) <= doc.FIGURE_MAX, (row.question, figure)


def test_every_results_file_parses_and_names_a_command_this_repository_runs() -> None:
    files = sorted(doc.RESULTS.glob("*.json"))
    assert files
    for path in files:
        result = json.loads(path.read_text())
        for key, kind in REQUIRED.items():
            assert isinstance(result.get(key), kind) or (key in result and result[key] is None and type(None) in (
                kind if isinstance(kind, tuple) else (kind,))), f"{path.name}: {key} missing or not {kind}"
        assert path.name == (f"{result['bench']}-{result['profile']}.json" if result["profile"]
                             else f"{result['bench']}.json"), f"{path.name}: not named after its bench and profile"
        if result["date"] is not None:
            datetime.datetime.fromisoformat(result["date"])  # a date, or a UTC time
        assert result["commit"] is None or re.fullmatch(r"[0-9a-f]{7,40}", result["commit"]), path.name
        assert result["provenance"].strip() and result["figures"], path.name
        assert not command_problems(result["command"]), f"{path.name}: {command_problems(result['command'])}"
        module = re.search(r"-m bench\.(\w+)", result["command"])
        if module:
            assert module.group(1) == result["bench"], f"{path.name}: bench.{module.group(1)}'s result under another name"
            assert (ROOT / "bench" / f"{module.group(1)}.py").is_file()


def test_a_command_with_a_machine_path_or_a_missing_module_is_refused() -> None:
    assert command_problems("cd /home/me/checkout && .ci/run")
    assert command_problems(".venv/bin/python -m bench.nothing")
    assert command_problems("make nothing")
    assert not command_problems("PROOFSWARM_IPFS_BIN=.tools/bin/ipfs nice -n 5 .venv/bin/python -m bench.gas --x 'a b'")
    assert not command_problems(".ci/run") and not command_problems("make demo")


def test_the_page_links_every_notes_file() -> None:
    text = doc.DOC.read_text()
    for page in sorted((ROOT / "docs" / "notes").glob("*.md")):
        assert f"(notes/{page.name})" in text, f"docs/benchmarks.md does not link docs/notes/{page.name}"


def test_a_results_file_the_figure_cannot_read_is_named() -> None:
    results = doc.load_results()
    broken = {**results, "gas.json": {**results["gas.json"], "figures": {}}}
    try:
        doc.render(broken)
    except ValueError as exc:
        assert "Gas per court-pool file" in str(exc) and "bench/results/gas.json" in str(exc)
    else:
        raise AssertionError("a results file without the figure's keys made a table")
    missing = {k: v for k, v in results.items() if k != "suite.json"}
    try:
        doc.render(missing)
    except ValueError as exc:
        assert "no bench/results/suite.json" in str(exc)
    else:
        raise AssertionError("a row without its results file made a table")


def test_a_single_run_of_the_protocol_bench_feeds_its_rows() -> None:
    """What `bench.protocol --q 0.05 --record` writes without --repeats (no medians, no per-step keys)."""
    run = {"command": ".venv/bin/python -m bench.protocol --q 0.05", "figures": {
        "local_s": 100.0, "protocol_q5_s": 150.0, "ratio_q5": 1.5, "steps": {"local": 200, "protocol_q5": 150}}}
    rows = {row.question: row for row in doc.ROWS}
    assert rows["Verified vs local RL: time to 0.8, ratio at q = 5 %"].figure(run).startswith("1.5 (protocol 150 s, local 100 s;")
    assert rows["Verified vs local RL: per trainer step, q = 5 %"].figure(run) == "2.0× local (1.0 s against 0.5 s a trainer step)"
    missed = {"figures": {**run["figures"], "protocol_q5_s": None, "ratio_q5": None, "ratio_q5_min": 4.0,
                          "protocol_q5_min_s": 400.0}}
    assert rows["Verified vs local RL: time to 0.8, ratio at q = 5 %"].figure(missed).startswith("≥ 4.0")
