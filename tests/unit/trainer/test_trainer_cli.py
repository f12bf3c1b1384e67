"""The trainer and local worker CLIs: bad input gets one line and a non-zero exit."""

import pytest

from cli.errors import EXIT_USAGE
from trainer.local_cli import main as trainer_main
from worker.local_cli import main as worker_main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--config", "/nonexistent/run.toml"], "config file /nonexistent/run.toml does not exist"),
        (["--batch_samples", "17"], "must be a multiple of group_size"),
        (["--config"], "--config needs a value"),
        (["--max_step", "3"], "unknown configuration option --max_step 3 (a typo?)"),
        (["--optim.lrr", "1"], "unknown configuration option --optim.lrr 1 (a typo?)"),
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


@pytest.mark.parametrize(("toml", "key"), [("max_step = 20\n", "'max_step'"), ("[optim]\nlrr = 0.1\n", "'optim.lrr'"),
                                           ("[loss]\nepsilonn = 0.1\n", "'loss.epsilonn'"),
                                           ("[model]\nhiden = 8\n", "'model.hiden'")])
def test_a_typo_in_the_trainer_toml_is_an_error_not_a_default(tmp_path, capsys, toml, key):
    config = tmp_path / "trainer.toml"
    config.write_text(toml)
    assert trainer_main(["--config", str(config)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == f"error: unknown configuration key {key} (a typo?)\n"


def test_a_typo_in_the_local_worker_options_is_an_error(capsys):
    assert worker_main(["--max_token", "3"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: unknown configuration option --max_token 3") and err.count("\n") == 1
