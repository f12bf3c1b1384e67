"""One exit code per kind of error, across every command: the table in cli.errors is the rule,
and each console script follows it (in-process, so the checks are fast and need no devnet)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from eth_account import Account
from pydantic import BaseModel, ValidationError

from cli.console import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated, stop_on_signals
from cli.devnet import DevnetCorrupt
from cli.errors import EXIT_CODES, EXIT_FAILURE, EXIT_USAGE, UsageError, exit_code_of
from cli.options import amount_option
from dashboard.cli import main as explorer_main
from dashboard.service import free_port
from deploy.checkpoint_cli import main as checkpoint_main
from deploy.cli import main as devnet_main
from deploy.kubo_node import KuboStartError
from deploy.pool_cli import main as pool_main
from ledger_client.chain.errors import RpcUnreachable, UnknownPool
from ledger_client.chain.keys import write_keystore
from ledger_client.ipfs.kubo import KuboUnreachable
from protocol.digest import InvalidCid, InvalidDigest, InvalidWorkId
from protocol.errors import InvalidInput
from protocol.manifest import InvalidManifest
from protocol.rollouts import RolloutSchemaError
from tests.support.paths import ROOT
from trainer.main import main as trainer_main
from validator.cli import main as validator_main
from worker.cli import main as worker_main
from worker.journal import JournalCorrupt
from worker.local_cli import main as local_worker_main


class _Config(BaseModel):
    port: int


def _validation_error() -> ValidationError:
    try:
        _Config(port="x")  # type: ignore[arg-type]
    except ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


@pytest.mark.parametrize(("error", "code"), [
    (UsageError("bad flag"), EXIT_USAGE),
    (InvalidInput("--backend vllm needs a policy folder"), EXIT_USAGE),  # library code's refusal (no cli import)
    (JournalCorrupt("journal.json: line 2 is not a journal line"), EXIT_USAGE),
    (_validation_error(), EXIT_USAGE),
    (InvalidDigest("0x12"), EXIT_USAGE),
    (InvalidWorkId("0x12"), EXIT_USAGE),
    (InvalidCid("bafy?"), EXIT_USAGE),
    (DevnetCorrupt("devnet.json"), EXIT_USAGE),
    (RpcUnreachable("http://127.0.0.1:1"), EXIT_FAILURE),
    (KuboUnreachable("/ip4/127.0.0.1/tcp/1"), EXIT_FAILURE),
    (KuboStartError("no daemon"), EXIT_FAILURE),
    (InvalidManifest("no shards"), EXIT_FAILURE),
    (RolloutSchemaError("bad header"), EXIT_FAILURE),
    (FileNotFoundError(2, "No such file or directory", "x.toml"), EXIT_FAILURE),
    (KeyboardInterrupt(), EXIT_INTERRUPTED),
    (Terminated(), EXIT_TERMINATED),
    (UnknownPool({"poolId": 999}), EXIT_USAGE),
])
def test_the_table_gives_each_kind_its_code(error: BaseException, code: int) -> None:
    assert exit_code_of(error) == code


def test_the_readme_table_lists_every_kind_under_its_code() -> None:
    rows = {line.split("|")[1].strip(): line for line in (ROOT / "README.md").read_text().splitlines()
            if line.startswith("| ") and line.split("|")[1].strip() in ("1", "2", "130", "143")}
    for dotted, code in EXIT_CODES:
        name = dotted.rsplit(".", 1)[1]
        assert f"`{name}`" in rows[str(code)], (name, code)


def test_an_unknown_error_is_a_bug_not_an_exit_code() -> None:
    assert exit_code_of(ZeroDivisionError()) is None
    assert exit_code_of(ZeroDivisionError(), failures=(ArithmeticError,)) == EXIT_FAILURE
    assert all(code in (EXIT_USAGE, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_TERMINATED) for _, code in EXIT_CODES)


def _dead_rpc() -> str:
    return f"http://127.0.0.1:{free_port()}"


COMMANDS = {
    "devnet": devnet_main, "pool": pool_main, "checkpoint": checkpoint_main, "worker": worker_main,
    "validator": validator_main, "trainer": trainer_main, "worker local": local_worker_main,
}


CASE_IDS = (
    'status without a chain',
    'create with a missing config',
    'worker status without a chain',
    'devnet worker without a devnet',
    'validator start without a chain',
    'checkpoint fetch of a short digest',
    'checkpoint fetch without Kubo',
    'trainer start without a chain',
    'trainer local batch not whole groups',
    'trainer local --config without a file',
    'worker local bad address',
    'corrupt devnet.json',
    'malformed key',
    'missing keystore',
    'keystore without password or terminal',
    'wrong keystore password',
    'rpc url not a URL',
    'no key',
    'pool.toml typo',
    'trainer.toml typo',
    'trainer flag typo',
    'worker-local toml typo',
    'run spec typo',
    'unknown task',
    'run spec with completions shorter than its TOPLOC minimum',
    'trainer init checkpoint not a folder',
    'worker start --max-submissions -1',
    'worker start --pool 0',
    'worker start --explorer notaurl',
    'worker start --metrics-port 99999',
    'validator start --audit-rate 2',
    'validator start --fetch-timeout 0',
    'trainer init --warm-steps -5',
    'devnet deploy --token 0x12',
    'devnet advance -3',
    'devnet mint to a bad address',
    'devnet mint without a devnet',
    'devnet mint without an amount',
    'pool status of a pool id not a number',
    'checkpoint fetch --retries -1',
    'an unknown subcommand',
    'a missing required option',
    'a config file value out of range',
)
"""Bad input and failures every command must answer with one line and its code, in _cases' order."""


def _cases(tmp_path: Path) -> dict[str, tuple[str, list[str], int]]:
    """CASE_IDS' cases: (command, argv, exit code), with the files they need made in `tmp_path`."""
    deployments = tmp_path / "deployments.json"
    deployments.write_text("{}")
    chain = ["--rpc-url", _dead_rpc(), "--deployments", str(deployments), "--key", "0x" + "01" * 32,
             "--devnet-dir", str(tmp_path / "no-devnet")]
    without_key = [a for a in chain if a not in ("--key", "0x" + "01" * 32)]
    keystore = write_keystore(Account.from_key("0x" + "02" * 32), tmp_path / "key.json", "right")
    wrong = tmp_path / "wrong-password"
    wrong.write_text("wrong\n")
    typos = _typos(tmp_path)
    cases = [
        ("pool", ["status", "1", *chain], EXIT_FAILURE),
        ("pool", ["create", "--config", str(tmp_path / "missing.toml"), *chain], EXIT_USAGE),
        ("worker", ["status", *chain], EXIT_FAILURE),
        ("worker", ["status", "--devnet-worker", "1", *[a for a in chain if a != "0x" + "01" * 32 and a != "--key"]],
         EXIT_USAGE),
        ("validator", ["start", "--pool", "1", "--kubo-api", "/ip4/127.0.0.1/tcp/1", *chain], EXIT_FAILURE),
        ("checkpoint", ["fetch", "0x1234"], EXIT_USAGE),
        ("checkpoint", ["fetch", "0x" + "ab" * 32, "--kubo-api", "/ip4/127.0.0.1/tcp/1"], EXIT_FAILURE),
        ("trainer", ["start", "--pool", "1", *chain], EXIT_FAILURE),
        ("trainer", ["local", "--batch_samples", "17"], EXIT_USAGE),
        ("trainer", ["local", "--config"], EXIT_USAGE),
        ("worker local", ["--address", "bob"], EXIT_USAGE),
        ("devnet", ["status", "--state-dir", str(tmp_path / "corrupt")], EXIT_USAGE),
        # keys and chain options are bad input (2), not a failure to act (1)
        ("worker", ["status", *[a if a != "0x" + "01" * 32 else "0x12" for a in chain]], EXIT_USAGE),
        ("worker", ["status", *without_key, "--keystore", str(tmp_path / "missing.json")], EXIT_USAGE),
        ("worker", ["status", *without_key, "--keystore", str(keystore)], EXIT_USAGE),  # no password, no terminal
        ("worker", ["status", *without_key, "--keystore", str(keystore), "--password-file", str(wrong)], EXIT_USAGE),
        ("pool", ["status", "1", *without_key, "--key", "0x" + "01" * 32, "--rpc-url", "notaurl"], EXIT_USAGE),
        ("pool", ["close", "1", *without_key], EXIT_USAGE),  # no key at all
        # config typos, in every TOML and on every command line that sets config keys
        ("pool", ["create", "--config", str(typos["pool.toml"]), *chain], EXIT_USAGE),
        ("trainer", ["local", "--config", str(typos["trainer.toml"])], EXIT_USAGE),
        ("trainer", ["local", "--max_step", "3"], EXIT_USAGE),
        ("worker local", ["--config", str(typos["worker.toml"])], EXIT_USAGE),
        ("trainer", ["init", "--run-spec", str(typos["run.toml"]), "--kubo-api", "/ip4/127.0.0.1/tcp/1"], EXIT_USAGE),
        ("trainer", ["init", "--run-spec", str(typos["unknown-task.toml"]), "--kubo-api", "/ip4/127.0.0.1/tcp/1"],
         EXIT_USAGE),
        ("trainer", ["init", "--run-spec", str(typos["short-toploc.toml"]), "--kubo-api", "/ip4/127.0.0.1/tcp/1"],
         EXIT_USAGE),  # docs/protocol.md R6.25
        ("trainer", ["init", "--run-spec", str(ROOT / "examples/run.toml"), "--checkpoint", "/nonexistent",
                     "--kubo-api", "/ip4/127.0.0.1/tcp/1"], EXIT_USAGE),
        # numbers and URLs refused as the command line is read, before any effect (issue 47, finding 6)
        ("worker", ["start", "--pool", "1", "--max-submissions", "-1", *chain], EXIT_USAGE),
        ("worker", ["start", "--pool", "0", *chain], EXIT_USAGE),
        ("worker", ["start", "--pool", "1", "--explorer", "notaurl", *chain], EXIT_USAGE),
        ("worker", ["start", "--pool", "1", "--metrics-port", "99999", *chain], EXIT_USAGE),
        ("validator", ["start", "--pool", "1", "--audit-rate", "2", *chain], EXIT_USAGE),
        ("validator", ["start", "--pool", "1", "--fetch-timeout", "0", *chain], EXIT_USAGE),
        ("trainer", ["init", "--run-spec", str(ROOT / "examples/run.toml"), "--warm-steps", "-5"], EXIT_USAGE),
        ("devnet", ["deploy", "--token", "0x12", *without_key], EXIT_USAGE),
        ("devnet", ["advance", "-3"], EXIT_USAGE),
        ("devnet", ["mint", "0x12=1tokens", "--state-dir", str(tmp_path / "no-devnet")], EXIT_USAGE),
        ("devnet", ["mint", "0x" + "12" * 20 + "=1tokens", "--state-dir", str(tmp_path / "no-devnet")], EXIT_USAGE),
        ("devnet", ["mint", "0x" + "12" * 20, "--state-dir", str(tmp_path / "no-devnet")], EXIT_USAGE),
        ("pool", ["status", "one", *chain], EXIT_USAGE),
        ("checkpoint", ["fetch", "0x" + "ab" * 32, "--retries", "-1"], EXIT_USAGE),
        ("worker", ["stat", *chain], EXIT_USAGE),
        ("validator", ["start", *chain], EXIT_USAGE),
        ("worker", ["start", "--pool", "1", "--config", str(typos["worker-start.toml"]), *chain], EXIT_USAGE),
    ]
    assert len(cases) == len(CASE_IDS)
    return dict(zip(CASE_IDS, cases))


def _typos(tmp_path: Path) -> dict[str, Path]:
    """One misspelt key in each kind of TOML file (and a run spec naming a task that does not exist, and one whose
    max_tokens is below its min_toploc_tokens)."""
    run_spec = (ROOT / "examples/run.toml").read_text()
    texts = {"pool.toml": (ROOT / "examples/pool.toml").read_text().replace("funding =", "fundng ="),
             "trainer.toml": "max_step = 3\n", "worker.toml": "run_dir = 'x'\nmax_submisions = 3\n",
             "run.toml": run_spec.replace("temperature", "temprature"),
             "unknown-task.toml": run_spec.replace('name = "sort"', 'name = "nosuch"'),
             "short-toploc.toml": run_spec.replace("[verification]", "[verification]\nmin_toploc_tokens = 16"),
             "worker-start.toml": "max-pending = -2\n"}
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    return {name: tmp_path / name for name in texts}


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, list[str], int]]:
    tmp_path = tmp_path_factory.mktemp("cases")
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "devnet.json").write_text("{not json")
    return _cases(tmp_path)


@pytest.mark.parametrize("case", CASE_IDS)
def test_every_command_follows_the_table(case: str, cases, capsys: pytest.CaptureFixture[str]) -> None:
    name, argv, code = cases[case]
    got = COMMANDS[name](argv)
    err = capsys.readouterr().err
    assert got == code, (name, argv, got, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, (name, argv, err)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, EXIT_INTERRUPTED), (signal.SIGTERM, 0)])
def test_a_daemon_stops_on_ctrl_c_or_sigterm_and_reports_which(signum: int, code: int) -> None:
    """worker start and validator start: either signal sets the stop event (the daemon finishes the step in
    hand); Ctrl-C then exits 130 as every other command does, SIGTERM (a service manager's stop) 0."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        stop = threading.Event()
        exit_code = stop_on_signals(stop)
        assert exit_code() == 0 and not stop.is_set()
        os.kill(os.getpid(), signum)
        assert stop.wait(5) and exit_code() == code
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def test_commands_find_the_devnet_from_a_sub_folder_or_the_environment(tmp_path: Path, monkeypatch) -> None:
    """`.devnet` is looked up in the current folder and every folder above it; $PROOFSWARM_DEVNET_DIR wins;
    with neither, `./.devnet` (where `devnet up` starts one)."""
    from cli.devnet import default_devnet_dir

    monkeypatch.delenv("PROOFSWARM_DEVNET_DIR", raising=False)
    checkout, deep = tmp_path / "checkout", tmp_path / "checkout" / "runs" / "a"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert default_devnet_dir() == Path(".devnet")
    (checkout / ".devnet").mkdir()
    assert default_devnet_dir() == Path(".devnet")  # a folder without a devnet in it is not one
    (checkout / ".devnet" / "devnet.json").write_text("{}")
    assert default_devnet_dir() == checkout / ".devnet"
    monkeypatch.setenv("PROOFSWARM_DEVNET_DIR", str(tmp_path / "elsewhere"))
    assert default_devnet_dir() == tmp_path / "elsewhere"


@pytest.mark.parametrize(("text", "base_units"), [
    ("100e18", 100 * 10**18), ("1_000", 1000), ("1.5ether", 15 * 10**17), ("2.5 tokens", 25 * 10**17),
    ("30gwei", 30 * 10**9), ("7wei", 7), ("999900000000000000000001", 999900000000000000000001), ("1.5e18", 15 * 10**17),
])
def test_amounts_read_as_cast_reads_them(text: str, base_units: int) -> None:
    assert amount_option(text) == base_units


@pytest.mark.parametrize(("text", "reason"), [
    ("lots", "is not a number"), ("0.5wei", "not a whole number"), ("1.5", "not a whole number"), ("-1", "negative"),
    ("1e9999999", "does not fit in 256 bits"), ("nan", "not a whole number"),
])
def test_a_bad_amount_is_a_usage_error_naming_it(text: str, reason: str) -> None:
    with pytest.raises(UsageError, match=reason) as caught:
        amount_option(text)
    assert exit_code_of(caught.value) == EXIT_USAGE and repr(text) in str(caught.value)


def test_json_output_keeps_amounts_exact_for_readers_that_parse_doubles(capsys: pytest.CaptureFixture[str]) -> None:
    from cli.output import print_json

    print_json({"budget": 999900000000000000000001, "pool_id": 3, "ok": True, "slashes": [2**53 - 1, 2**53, -(2**60)]})
    assert json.loads(capsys.readouterr().out) == {"budget": "999900000000000000000001", "pool_id": 3, "ok": True,
                                                  "slashes": [2**53 - 1, str(2**53), str(-(2**60))]}


def test_results_for_people_show_amounts_in_tokens_and_whole_digests(capsys: pytest.CaptureFixture[str]) -> None:
    from cli.output import print_result

    digest = "0x" + "ab" * 32
    print_result({"pool_id": 3, "budget": 10_005 * 10**18, "reward_per_sample": 10**16, "slash_amount": 1,
                  "latest_checkpoint": digest, "member": True}, as_json=False)
    assert capsys.readouterr().out.splitlines() == [
        "pool_id            3", "budget             10005 tokens", "reward_per_sample  0.01 tokens",
        "slash_amount       0.000000000000000001 tokens", f"latest_checkpoint  {digest}", "member             yes"]


def _options_without_help(parser, command: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                missing += _options_without_help(sub, f"{command} {name}")
        elif action.help is None:
            missing.append(f"{command} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_option_of_every_command_says_what_it_does() -> None:
    from dashboard.cli import _parser as explorer_parser
    from deploy.checkpoint_cli import build_parser as checkpoint_parser
    from deploy.cli import _parser as devnet_parser
    from deploy.pool_cli import _parser as pool_parser
    from trainer.options import add_init_args, add_start_args
    from validator.cli import _parser as validator_parser
    from worker.cli import _parser as worker_parser

    parsers = {"devnet": devnet_parser(), "pool": pool_parser(), "worker": worker_parser(),
               "validator": validator_parser(), "checkpoint": checkpoint_parser(), "explorer": explorer_parser()}
    for name, add_args in (("trainer init", add_init_args), ("trainer start", add_start_args)):
        parsers[name] = argparse.ArgumentParser(prog=name)
        add_args(parsers[name])
    assert [o for name, p in parsers.items() for o in _options_without_help(p, name)] == []


@pytest.mark.parametrize("main", [devnet_main, pool_main, worker_main, validator_main, checkpoint_main, trainer_main,
                                  explorer_main])
def test_every_command_help_ends_with_examples(main, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["--help"])
    except SystemExit as exc:  # argparse's --help
        code = exc.code
    out = capsys.readouterr().out
    assert code == 0 and "\nexamples:\n" in out


LONG_RUNNING = {"worker": ["start", "--pool", "1"], "validator": ["start", "--pool", "1"],
                "trainer": ["start", "--pool", "1"], "explorer": ["start", "--port", "1"]}
"""The commands that run until stopped, each as far as its start-up can get without a chain. Started in this order
and signalled once the last says it is up: the explorer, which imports no torch and reaches the silent RPC (a 10 s
timeout) first, comes last, so that a loaded machine's slow start of the others cannot end its start-up first."""


@pytest.fixture
def silent_rpc() -> Iterator[str]:
    """An RPC URL whose server takes the connection and never answers: a command stays in its start-up."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def test_every_console_script_catches_ctrl_c_during_its_imports():
    """pyproject's console scripts point at the role packages' `main`, which import the command inside a try."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for name, target in scripts.items():
        module, attr = target.split(":")
        assert getattr(importlib.import_module(module), attr).__doc__.startswith("`"), (name, target)


def test_a_ctrl_c_python_had_to_ignore_still_stops_the_command(tmp_path: Path) -> None:
    """A KeyboardInterrupt raised where Python cannot propagate it (a finaliser here; in CI it was pydantic-core
    compiling a regex) used to print "Exception ignored in" with a traceback while the command went on: it is
    one line and exit 130, and the command does not go on."""
    (tmp_path / "swallowing_command.py").write_text(
        "class Finalised:\n"
        "    def __del__(self):\n"
        "        raise KeyboardInterrupt\n"
        "def main():\n"
        "    Finalised()\n"
        "    print('went on')\n"
        "    return 1\n")
    script = "import sys; from cli.console import console_script; sys.exit(console_script('swallowing_command')())"
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"})
    assert (done.returncode, done.stdout, done.stderr) == (EXIT_INTERRUPTED, "", "error: interrupted\n")


@pytest.mark.parametrize(("signum", "code", "line"), [(signal.SIGINT, EXIT_INTERRUPTED, "error: interrupted"),
                                                     (signal.SIGTERM, EXIT_TERMINATED, "error: terminated")])
@pytest.mark.parametrize("delay_s", [0.05, 2.0])
def test_ctrl_c_stops_every_long_running_command_in_its_start_up(delay_s: float, signum: int, code: int, line: str,
                                                                silent_rpc: str, tmp_path: Path):
    """Ctrl-C while the command's modules import (50 ms into them) or while it starts (2 s: torch importing, or
    waiting on the chain): one `error: interrupted` line and exit 130 (or death by SIGINT, which a shell also shows
    as 130), never a traceback; SIGTERM the same with `error: terminated` and 143 (a daemon that has not started
    has not done its job). Each command runs as pip's console script runs it, saying when it calls the entry
    point; before that — the interpreter's own start and the script's first lines, some tens of milliseconds — a
    Ctrl-C is Python's, with its traceback."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    chain = ["--rpc-url", silent_rpc, "--deployments", str(tmp_path / "deployments.json"), "--key", "0x" + "01" * 32,
             "--devnet-dir", str(tmp_path / "no-devnet")]
    todo, results = list(LONG_RUNNING), {}
    for _ in range(3):  # a command that ended before its signal (the silent RPC's 10 s timeout while a slower one
        procs = {}      # imported) tested nothing: it runs again, not judged on an exit the signal never caused
        for name in todo:
            module, attr = scripts[name].split(":")
            extra = [a for a in chain if name != "explorer" or a not in ("--key", "0x" + "01" * 32)]
            script = (f"import sys; from {module} import {attr}; sys.stdout.write('up'); sys.stdout.flush(); "
                      f"sys.exit({attr}())")
            procs[name] = subprocess.Popen(
                [sys.executable, "-c", script, *LONG_RUNNING[name], *extra],
                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)})
        for proc in procs.values():
            assert proc.stdout.read(2) == "up"
        time.sleep(delay_s)  # any moment of the start-up: each has the same expected outcome
        signalled = {name for name, proc in procs.items() if proc.poll() is None}
        for name in signalled:
            procs[name].send_signal(signum)
        for name, proc in procs.items():
            _, err = proc.communicate(timeout=600)  # a bound only a command that ignores the signal reaches
            if name in signalled:
                results[name] = (proc.returncode, err)
        todo = [name for name in todo if name not in signalled]
        if not todo:
            break
    assert not todo, f"ended before every signal in three tries: {todo}"
    for name, (returncode, err) in results.items():
        assert "Traceback" not in err, (name, err)
        assert returncode == -signum and not err or (returncode == code and err.strip() == line), (name, returncode, err)


def test_commands_on_a_chain_follow_the_table(chain, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The cases that need a chain to be refused: a pool id out of range or unknown, a wrong --chain-id, a bad
    amount, closing a closed pool; each one `error:` line and its code, with nothing sent."""
    from ledger_client.chain.ledger import save_deployment

    deployments = tmp_path / "deployments.json"
    save_deployment(deployments, chain.deployment)
    on_chain = ["--rpc-url", chain.anvil.rpc_url, "--deployments", str(deployments),
                "--devnet-dir", str(tmp_path / "no-devnet")]
    owner = [*on_chain, "--key", chain.accounts[1].key.to_0x_hex()]
    worker = [*on_chain, "--key", chain.accounts[4].key.to_0x_hex()]
    pool = str(chain.pool_id)
    assert pool_main(["close", pool, *owner]) == 0
    capsys.readouterr()
    for name, argv, code in [
        ("pool", ["status", *on_chain, "--", "-1"], EXIT_USAGE),
        ("pool", ["status", "999", *on_chain], EXIT_USAGE),
        ("pool", ["status", pool, *on_chain, "--chain-id", "1"], EXIT_USAGE),
        ("pool", ["close", pool, *owner], EXIT_USAGE),
        ("pool", ["fund", pool, "lots", *owner], EXIT_USAGE),
        ("worker", ["unstake", "lots", *worker], EXIT_USAGE),
        ("worker", ["claim", "--pool", "999", *worker], EXIT_USAGE),
        ("worker", ["deallocate", "--pool", "999", *worker], EXIT_USAGE),
        ("worker", ["unstake", "--leave", "999", *worker], EXIT_USAGE),
    ]:
        got = COMMANDS[name](argv)
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert got == code and len(lines) == 1 and lines[0].startswith("error: "), (name, argv, got, err)


def test_a_pool_create_failing_after_its_first_transaction_names_the_pool_and_the_fix(chain) -> None:
    """The owner's tokens leave between the balance check and the funding (another spender): the pool exists,
    unfunded, and the error says which pool and which command funds it (exit 1: it could not do its job)."""
    from deploy.terms import PoolHalfCreated
    from deploy.pools import create_pool
    from tests.support.conftest_chain import pool_config

    owner = chain.owner
    approve = owner.token.approve

    def spent_elsewhere_first(spender: str, amount: int):
        owner.token.transfer(chain.accounts[9].address, owner.token.balance_of(owner.address))
        return approve(spender, amount)

    owner.token.approve = spent_elsewhere_first
    with pytest.raises(PoolHalfCreated) as caught:
        create_pool(owner, pool_config(chain.accounts, funding=5 * 10**18))
    pool_id = owner.pool.pool_count()  # ids count up from 1: the pool just made
    assert owner.pool.get_pool(pool_id)  # it exists
    assert str(caught.value).startswith(f"pool {pool_id} was created, but funding it with {5 * 10**18} failed")
    assert f"`pool fund {pool_id} {5 * 10**18}` funds it" in str(caught.value)
    assert exit_code_of(caught.value, failures=(PoolHalfCreated,)) == EXIT_FAILURE
