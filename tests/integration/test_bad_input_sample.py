"""The README's promise for bad input, on a sample drawn from the commands themselves (issue 47): every option of
every subcommand whose value has a checked type (whole numbers, numbers, ports, pool ids, URLs, addresses) is given
values outside that type, and each must be refused with one `error:` line that names the option, exit code 2, and
nothing done. The options are read from the commands' own parsers, so a new option joins the sample by itself.
Together with test_exit_codes.py's hand-picked cases the sample is well over 150 cases (counted below)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from cli.errors import EXIT_USAGE
from cli.options import address, http_url
from tests.integration.test_exit_codes import CASE_IDS, COMMANDS
from dashboard.cli import main as explorer_main

ENTRY_POINTS: dict[str, tuple[Callable[[list[str]], int], list[str]]] = {
    "devnet": (COMMANDS["devnet"], []), "pool": (COMMANDS["pool"], []), "checkpoint": (COMMANDS["checkpoint"], []),
    "worker": (COMMANDS["worker"], []), "validator": (COMMANDS["validator"], []), "explorer": (explorer_main, []),
    "trainer init": (COMMANDS["trainer"], ["init"]), "trainer start": (COMMANDS["trainer"], ["start"]),
}
"""Each command's entry point and the words that reach its parser."""
BAD_VALUES = {
    "whole number": ("many", "1.5"),
    "number": ("soon", "nan", "inf"),
    http_url.__name__: ("notaurl", "ftp://127.0.0.1:1"),
    address.__name__: ("0x12", "0x" + "zz" * 20),
}
"""Values outside each checked type whatever its bounds; `_out_of_bounds` adds those just past its bounds."""
MIN_SAMPLE = 150


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


@contextmanager
def _capturing_parsers() -> Iterator[None]:
    """Parsing stops at the first parser a command builds, raising it (no command does anything before it parses)."""
    original = argparse.ArgumentParser.parse_known_args

    def capture(self, *args, **kwargs):
        raise _Captured(self)

    argparse.ArgumentParser.parse_known_args = capture  # type: ignore[method-assign]
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_known_args = original  # type: ignore[method-assign]


def _parser_of(command: str) -> argparse.ArgumentParser:
    main, words = ENTRY_POINTS[command]
    with _capturing_parsers(), pytest.raises(_Captured) as caught:
        main([*words, "--help"])
    return caught.value.parser


def _checked_options(parser: argparse.ArgumentParser, words: list[str]) -> Iterator[tuple[list[str], str, str]]:
    """(words to the subcommand, option string, type) of every option with a checked type, subcommands too."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _checked_options(sub, [*words, name])
        elif action.option_strings and getattr(action.type, "__name__", None) in BAD_VALUES:
            yield words, action.option_strings[-1], action.type


def _out_of_bounds(kind: Callable[[str], object]) -> tuple[str, ...]:
    """The values just past a whole-number or number type's bounds (cli.options.whole and real record them)."""
    if not hasattr(kind, "least"):
        return ()
    below = kind.least if getattr(kind, "above", False) else kind.least - 1
    return (str(below),) + (() if kind.most is None else (str(kind.most + 1),))


def _sample() -> list[tuple[str, list[str], str]]:
    """(command, argv, option) of every bad value of every checked option."""
    cases = []
    for command, (_, words) in ENTRY_POINTS.items():
        for sub_words, option, kind in _checked_options(_parser_of(command), list(words)):
            values = BAD_VALUES[kind.__name__] + _out_of_bounds(kind)
            cases += [(command, [*sub_words, f"{option}={value}"], option) for value in values]
    return cases


SAMPLE = _sample()


def test_the_sample_covers_every_command_and_with_the_hand_picked_cases_holds_150():
    assert {command for command, _, _ in SAMPLE} >= {"devnet", "pool", "checkpoint", "worker", "validator", "explorer",
                                                    "trainer init", "trainer start"}
    assert len(SAMPLE) + len(CASE_IDS) >= MIN_SAMPLE, (len(SAMPLE), len(CASE_IDS))


@pytest.mark.parametrize(("command", "argv", "option"), SAMPLE, ids=[" ".join([c, *a]) for c, a, _ in SAMPLE])
def test_a_bad_value_is_one_error_line_naming_its_option_and_exit_2(command: str, argv: list[str], option: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    main, _ = ENTRY_POINTS[command]
    got = main(argv)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert got == EXIT_USAGE, (argv, got, captured.err)
    assert len(lines) == 1 and lines[0].startswith("error: ") and option in lines[0], (argv, captured.err)
    assert captured.out == "", (argv, captured.out)  # refused before it printed, or did, anything
