"""Every console command answers `--help` and refuses bad input (a bad number, a missing file, a malformed URL or
address, an unknown device) before torch, web3 or pyarrow load: seconds of start-up that such an answer never
needs (issue 47, finding 9: a missing run spec took 125 s). Held by what each run imported, never by a clock; the
seconds are bench.cli_startup's."""

from __future__ import annotations

import tomllib

import pytest

from bench.cli_startup import COMMANDS, run
from tests.support.paths import ROOT

CASES = [pytest.param(c.entry, (), 0, id=f"{c.name} --help") for c in COMMANDS] + \
        [pytest.param(c.entry, c.help, 0, id=" ".join((c.name, *c.help))) for c in COMMANDS] + \
        [pytest.param(c.entry, bad, 2, id=" ".join((c.name, *bad))) for c in COMMANDS for bad in c.bad]


def test_the_cases_cover_every_console_script() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert {c.name: c.entry for c in COMMANDS} == scripts


@pytest.mark.parametrize(("entry", "args", "exit_code"), CASES)
def test_help_and_bad_input_are_answered_before_the_heavy_modules_load(entry, args, exit_code, tmp_path) -> None:
    args = args or ("--help",)
    done = run(entry, args, cwd=tmp_path, probe=True, timeout=300)
    *said, loaded = done.stderr.strip().splitlines()
    assert done.returncode == exit_code, done.stderr
    if exit_code:  # one line naming the problem, no traceback
        assert len(said) == 1 and said[0].startswith("error: "), done.stderr
    else:
        assert said == [] and done.stdout.strip(), done.stderr  # the help, on stdout
    assert loaded == "loaded:", f"{' '.join(args)} imported {loaded.removeprefix('loaded: ')}"


def test_the_exit_table_names_each_class_where_it_is_defined() -> None:
    """cli.errors.EXIT_CODES names its classes instead of importing them, and matches a class only once its module
    is loaded: so each name must be a real exception class of the module that defines it (or of a package above
    it, which Python imports first), else an error of that kind would go unmatched."""
    import importlib

    from cli.errors import EXIT_CODES

    for dotted, _ in EXIT_CODES:
        module, name = dotted.rsplit(".", 1)
        cls = getattr(importlib.import_module(module), name)
        assert isinstance(cls, type) and issubclass(cls, BaseException), dotted
        assert cls.__module__ == module or cls.__module__.startswith(module + "."), (dotted, cls.__module__)
