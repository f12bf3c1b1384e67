"""`worker start --config FILE` and `validator start --config FILE` (cli.options.parse_with_config): a TOML file of the
command's options, named as its flags; flags on the command line win; a bad file is one `error:` line and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.errors import EXIT_USAGE
from cli.options import parse_with_config
from validator.cli import _parser as validator_parser
from validator.cli import main as validator_main
from worker.cli import _parser as worker_parser
from worker.cli import main as worker_main


def test_a_config_file_gives_the_options_and_flags_win(tmp_path: Path) -> None:
    config = tmp_path / "validator.toml"
    config.write_text('pool = 3\nfetch-timeout = 7\nstate-dir = "/srv/validator"\ndevnet-validator = true\naudit_rate = 0.5\n')
    args = parse_with_config(validator_parser(), ["start", "--config", str(config), "--fetch-timeout", "9"])
    assert (args.pool, args.fetch_timeout, args.state_dir, args.devnet_validator, args.audit_rate) == \
        (3, 9.0, Path("/srv/validator"), True, 0.5)  # converted as the flags are; the flag beat the file
    assert parse_with_config(validator_parser(), ["start", "--pool", "4", f"--config={config}"]).pool == 4
    worker_config = tmp_path / "worker.toml"
    worker_config.write_text("pool = 2\ndevnet-worker = 1\nmax-submissions = 5\nno-pace = true\n")
    args = parse_with_config(worker_parser(), ["start", "--config", str(worker_config)])
    assert (args.pool, args.devnet_worker, args.max_submissions, args.no_pace) == (2, 1, 5, True)


@pytest.mark.parametrize(("text", "says"), [
    ("poool = 3", "'poool' is no option of `validator start`"),
    ("pool = [1]", "pool = [1] is not a value for --pool"),
    ('devnet-validator = "yes"', "devnet-validator = 'yes' is not a boolean for --devnet-validator"),
    ("pool = 3\n[x", "is no TOML file"),
])
def test_a_bad_config_file_is_one_line_and_exit_2(tmp_path: Path, capsys, text: str, says: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text)
    assert validator_main(["start", "--config", str(config)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: config file") and says in err and "\n" not in err


def test_a_missing_config_file_is_named(tmp_path: Path, capsys) -> None:
    assert worker_main(["start", "--config", str(tmp_path / "none.toml")]) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == f"error: config file {tmp_path / 'none.toml'} does not exist"
