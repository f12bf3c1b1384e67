"""`trainer init` says what it is doing (issue 47, finding 7: it printed nothing for minutes): a line per phase and
the warm start's loss every tenth of its steps, on stderr, none with --json or --quiet."""

from __future__ import annotations

import pytest

from cli.output import progress_lines
from protocol.runspec import load_run_spec
from tests.support.paths import ROOT
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec


def test_the_warm_start_reports_its_loss_every_tenth_of_its_steps_and_at_its_end() -> None:
    lines: list[str] = []
    init_policy(load_run_spec(ROOT / "examples/run.toml"), ModelSpec(hidden=16, layers=1, heads=2), warm_steps=25,
                warm_lr=1e-3, say=lines.append)
    assert lines[0] == "building the tiny char-level Llama (hidden 16, 1 layers, 2 heads)"
    assert lines[1] == "warm start on sort's answer format: 25 steps"
    steps = [line.split(",")[0] for line in lines[2:]]
    assert steps == [f"warm start step {n}/25" for n in (2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 25)]
    assert all(float(line.rsplit("loss ", 1)[1]) > 0 for line in lines[2:])


@pytest.mark.parametrize("quiet", [False, True])
def test_progress_lines_go_to_stderr_named_by_the_command_or_nowhere(quiet: bool, capsys) -> None:
    progress_lines("trainer init", quiet=quiet)("publishing the run spec")
    out, err = capsys.readouterr()
    assert out == "" and err == ("" if quiet else "trainer init: publishing the run spec\n")
