"""bench.report: a bench's JSON line is printed as before, and `--record [PROFILE]` also keeps it as the bench's newest
result in bench/results/ (the files docs/benchmarks.md is generated from). No bench is run here."""

from __future__ import annotations

import argparse
import datetime
import json
import re

import pytest

from bench import report
from tests.support.paths import ROOT

NOT_BENCHES = {"async_steps", "doc"}
"""bench.async_steps is bench.async's exploration helper (positional arguments, one JSON line per seed): no result;
bench.doc writes docs/benchmarks.md's table from the results."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--q", default="0.05")
    report.add_record_option(parser)
    return parser


def test_the_command_is_the_run_without_its_record_option() -> None:
    assert report.command_of("protocol", ["--q", "0.05", "--record", "q5", "--repeats", "3"]) == \
        ".venv/bin/python -m bench.protocol --q 0.05 --repeats 3"
    assert report.command_of("protocol", ["--record", "--q", "1"]) == ".venv/bin/python -m bench.protocol --q 1"
    assert report.command_of("gas", ["--record=x"]) == ".venv/bin/python -m bench.gas"
    assert report.command_of("file_size", ["--only", "bf16: logit", "--rec", "big"]) == \
        ".venv/bin/python -m bench.file_size --only 'bf16: logit'"


def test_the_command_names_no_path_of_the_machine_it_ran_on() -> None:
    assert report.command_of("explorer_scale", ["--db", "/tmp/i.db", "--record", "300k", "--files", "3"]) == \
        ".venv/bin/python -m bench.explorer_scale --db PATH --files 3"
    assert report.command_of("x", ["--out=~/runs", "--n=3", "runs/a"]) == ".venv/bin/python -m bench.x --out=PATH --n=3 runs/a"


def test_without_record_the_json_line_is_printed_and_nothing_written(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    report.emit({"ratio": 1.05}, _parser().parse_args([]), "protocol")
    assert capsys.readouterr().out.splitlines()[-1] == '{"ratio": 1.05}'
    assert not list(tmp_path.iterdir())


def test_record_writes_the_newest_result_of_the_bench_and_profile(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    argv = ["--q", "1", "--record", "q1"]
    report.emit({"ratio": 1.86}, _parser().parse_args(argv), "protocol", argv)
    out = capsys.readouterr()
    assert out.out.splitlines()[-1] == '{"ratio": 1.86}'  # stdout's last line is still the JSON line
    assert "bench/results" not in out.out and "protocol-q1.json" in out.err
    doc = json.loads((tmp_path / "protocol-q1.json").read_text())
    assert {k: doc[k] for k in ("bench", "profile", "command", "figures")} == {
        "bench": "protocol", "profile": "q1", "command": ".venv/bin/python -m bench.protocol --q 1", "figures": {"ratio": 1.86}}
    assert datetime.datetime.strptime(doc["date"], "%Y-%m-%dT%H:%M:%SZ")
    assert doc["commit"] is None or re.fullmatch(r"[0-9a-f]{7,40}", doc["commit"])
    assert "cores" in doc["machine"] and doc["provenance"].startswith("recorded by")
    report.emit({"ratio": 1.5}, _parser().parse_args(argv), "protocol", argv)
    assert json.loads((tmp_path / "protocol-q1.json").read_text())["figures"] == {"ratio": 1.5}  # newest only
    report.emit({"ratio": 2}, _parser().parse_args(["--record"]), "protocol", ["--record"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["protocol-q1.json", "protocol.json"]


def test_a_profile_that_cannot_name_a_file_is_refused_before_the_run(capsys) -> None:
    for bad in ("../x", "Q1", "a b", "-x"):
        with pytest.raises(SystemExit) as exc:
            _parser().parse_args([f"--record={bad}"])
        assert exc.value.code == 2


def test_every_bench_can_record_its_result() -> None:
    """Every bench with a `main` takes `--record` and prints its last line through `report.emit` (or `print_rows`)."""
    for path in sorted((ROOT / "bench").glob("*.py")):
        source = path.read_text()
        if "def main(" not in source or path.stem in NOT_BENCHES:
            continue
        assert "add_record_option(" in source, f"{path.name}: no --record"
        assert re.search(rf"\bargs,\s+\"{path.stem}\"", source), \
            f"{path.name}: the JSON line does not go through bench.report's emit or print_rows with the bench's name"
