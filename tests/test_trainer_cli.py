"""The trainer and local worker CLIs: bad input gets one line and a non-zero exit."""

import pytest

from ledger_client.cli import EXIT_USAGE
from trainer.local_cli import main as trainer_main
from worker.local_cli import main as worker_main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--config", "/nonexistent/run.toml"], "config file /nonexistent/run.toml does not exist"),
        (["--batch_samples", "17"], "must be a multiple of group_size"),
        (["--config"], "--config needs a value"),
    ],
)
def test_trainer_cli_errors_are_one_line(argv, message, capsys):
    assert trainer_main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_worker_cli_refuses_a_bad_address(capsys):
    assert worker_main(["--address", "bob"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: invalid configuration: address") and err.count("\n") == 1
