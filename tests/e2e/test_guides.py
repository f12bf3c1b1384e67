"""The three role guides (docs/guide-pool-owner.md, guide-contributor.md, guide-validator.md) as a user runs them:
their `sh` blocks, read from the guides themselves, typed into one shell on one fresh devnet, in the order the
guides interleave. Then, on the same devnet, `pool create`'s refusals of bad configs."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from cli.devnet import load_devnet_info, load_trainer_init
from deploy.devnet import DEV_TOKENS_PER_ACCOUNT
from deploy.pool_cli import main as pool_main
from ledger_client.chain.keys import load_account
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import claimed_total, claimed_works, pool_state
from protocol.digest import hex_text
from tests.e2e.test_cli import ROOT, run
from tests.support.shell import run_script
from worker.cli import main as worker_main

GUIDES = {name: ROOT / "docs" / f"guide-{name}.md" for name in ("pool-owner", "contributor", "validator")}
ORDER = ["owner-setup", "validator-start", "owner-train", "contributor-submit", "validator-judged",
         "contributor-claim", "owner-trained", "validator-stop", "contributor-leave", "owner-close"]
"""The guides' blocks in the order a pool's first session needs them: a court pool, its validator registered and
its trainer running, a worker's submissions judged, final and paid, the trainer's step, everyone leaving."""


def guide_blocks() -> dict[str, str]:
    """Every ```sh NAME block of the guides, by name."""
    blocks: dict[str, str] = {}
    for path in GUIDES.values():
        for name, body in re.findall(r"^```sh ([\w-]+)\n(.*?)^```$", path.read_text(), re.S | re.M):
            assert name not in blocks, f"block {name} appears twice"
            blocks[name] = body
    return blocks


@pytest.fixture(scope="module")
def checkout(tmp_path_factory, kubo_node):  # kubo_node: skips unless a real Kubo is installed
    """A folder as a user's checkout looks to the guides' commands (its examples/), with the devnet in .devnet."""
    home = tmp_path_factory.mktemp("guides")
    (home / "examples").symlink_to(ROOT / "examples")
    yield home
    run("deploy.cli", "down", "--state-dir", str(home / ".devnet"), cwd=home, ok=False)


def test_every_block_of_the_guides_runs_in_the_test():
    assert sorted(guide_blocks()) == sorted(ORDER)


@pytest.mark.timeout(1800)
def test_the_guides_take_a_pool_from_nothing_to_a_training_step_and_a_paid_worker(checkout: Path):
    blocks = guide_blocks()
    script = "".join(f"echo \"### {name} $SECONDS s\"\n{blocks[name]}" for name in ORDER) + 'echo "### end $SECONDS s"\n'
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT)}
    env.pop("PROOFSWARM_DEVNET_DIR", None)
    run = run_script(script, checkout, env, timeout=1500)  # 150 s alone; 8× that beside the heaviest modules on 2 cores
    print(*re.findall(r"^### .*$", run.out, re.M), sep="\n")  # when each block started (pytest -s shows it)
    out = run.check()
    assert "validator exited with code 130" in out, out  # Ctrl-C: a clean stop

    info = load_devnet_info(checkout / ".devnet")
    ledger = Ledger.open(info["rpc_url"], Path(info["deployments"]), load_account(info["roles"]["pool_owner"]["private_key"]))
    pool = pool_state(ledger, 1)
    init = load_trainer_init(checkout / ".devnet")
    assert hex_text(pool.task_ref) == init["task"] and hex_text(pool.base_checkpoint) == init["base_checkpoint"]
    assert pool.latest_step == 1 and pool.status.name == "CLOSED"  # the trainer stepped on accepted work
    worker = info["workers"][0]["address"]
    paid = claimed_total(ledger, worker)
    assert len(claimed_works(ledger, worker)) == 1 and paid == 128 * pool.reward_per_sample  # its file paid
    assert ledger.stake.bonded_of(worker) == 0 and ledger.stake.unbonding_of(worker)[0] == 0  # withdrawn
    assert ledger.token.balance_of(worker) == DEV_TOKENS_PER_ACCOUNT + paid
    validator = info["roles"]["validator"]["address"]
    court = ledger.court.get_validator(1, validator)
    assert court.deregistered_at and court.locked == 0  # deregistered, its bond withdrawn
    verdict_fee = 10**17  # examples/pool-court.toml: the one final verdict's fee, withdrawn to the wallet
    assert ledger.token.balance_of(validator) + ledger.stake.bonded_of(validator) == DEV_TOKENS_PER_ACCOUNT + verdict_fee


def test_pool_create_refuses_bad_configs_before_any_transaction(checkout: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]):
    """On the guides' devnet (after `trainer init` recorded its digests): each bad config is one error line and
    exit 2, and no pool is created (`pool create` run in this process: a dozen cases, no start-up each)."""
    chain = ["--devnet-dir", str(checkout / ".devnet")]
    init = load_trainer_init(checkout / ".devnet")
    if init is None:
        pytest.skip("the guides' test did not get as far as trainer init")
    info = load_devnet_info(checkout / ".devnet")
    pools_before = Ledger.open(info["rpc_url"], Path(info["deployments"])).pool.pool_count()

    def refused(toml: str, needle: str, code: int = 2) -> None:
        bad = tmp_path / "bad.toml"
        bad.write_text(toml)
        got = pool_main(["create", "--config", str(bad), "--ipfs-timeout", "2", *chain])
        err = capsys.readouterr().err
        assert got == code and "Traceback" not in err, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err

    pool_toml = (ROOT / "examples/pool.toml").read_text()
    court_toml = (ROOT / "examples/pool-court.toml").read_text()
    refused("[pool]\ntrainer = '@trainer'\n", "invalid configuration")
    refused("[pool\n", "not valid TOML")
    refused(pool_toml.replace("funding =", "fundng ="), "unknown configuration key 'fundng'")
    for edit, needle in ((("reward_lock_s = 120", "reward_lock_s = 5"), "reward_lock_s must be > challenge_window_s"),
                         (("bounty_bps = 2000", "bounty_bps = 5001"), "bounty_bps"),
                         (("# max_samples_per_work = 128", "max_samples_per_work = 64"),
                          "max_samples_per_work (64) is below one submission of the run spec (128"),
                         # q = 5 %: one fabricated completion of 128 is caught with P = 7/128; S must be ≥ 19 × 128e18
                         (("funding =", "spot_check_bps = 500\nfunding ="), "is below 2432000000000000000000, the least"),
                         (("funding =", "spot_check_bps = 0\nfunding ="), "spot_check_bps"),
                         (('funding = "10000e18"', 'funding = "1e40"'), "nothing was created"),
                         (('task = "@init"', 'task = "digits/add-v1"'), "is not a run spec's 0x digest"),
                         (('task = "@init"', 'task = "0x' + "ab" * 32 + '"'),
                          f"task 0x{'ab' * 32}: no run spec on IPFS within"),
                         (('base_checkpoint = "@init"', 'base_checkpoint = "0x' + "cd" * 32 + '"'),
                          f"base_checkpoint 0x{'cd' * 32}: no readable checkpoint manifest"),
                         # on IPFS, but not what the key names: the manifest as the run spec and the other way round
                         (('task = "@init"', f'task = "{init["base_checkpoint"]}"'),
                          f"task {init['base_checkpoint']} is not a well-formed run spec"),
                         (('base_checkpoint = "@init"', f'base_checkpoint = "{init["task"]}"'),
                          f"base_checkpoint {init['task']}: no readable checkpoint manifest")):
        refused(pool_toml.replace(*edit), needle)
    for edit, needle in ((("committee_size = 3", "committee_size = 1"), "committee_size"),
                         (("assigned_window_s = 36", "assigned_window_s = 1"), "court assigned_window_s is 1 s, below"),
                         # a window `validator start` with its defaults would refuse (issue 47, finding 3)
                         (("dispute_window_s = 60", "dispute_window_s = 10"), "court dispute_window_s is 10 s, below 50 s"),
                         (("challenge_window_s = 300", "challenge_window_s = 200"), "must fit in challenge_window_s (200)"),
                         (('wrong_verdict_slash = "60e18"', 'wrong_verdict_slash = "1e18"'), "wrong_verdict_slash")):
        refused(court_toml.replace(*edit), needle)  # the court's bounds
    assert Ledger.open(info["rpc_url"], Path(info["deployments"])).pool.pool_count() == pools_before


def test_pool_commands_and_their_refusals(checkout: Path, monkeypatch, capsys: pytest.CaptureFixture[str]):
    """A second pool of the same config on the guides' devnet: fund, status and close, for people and scripts,
    and the one-line refusals of a wrong chain, an unknown pool, a stranger's close and a second close (the
    commands run in this process: the guides ran them as processes)."""
    if load_trainer_init(checkout / ".devnet") is None:
        pytest.skip("the guides' test did not get as far as trainer init")
    monkeypatch.chdir(checkout)
    chain = ["--devnet-dir", str(checkout / ".devnet")]

    def ok(main, *argv: str) -> dict:
        assert main([*argv, "--json", *chain]) == 0
        return json.loads(capsys.readouterr().out)

    def refused(main, needle: str, code: int, *argv: str) -> None:
        assert main([*argv, *chain]) == code
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines

    created = ok(pool_main, "create", "--config", "examples/pool.toml")
    pool_id = str(created["pool_id"])
    assert (created["spot_check_bps"], created["checked_per_file"]) == (10_000, "128 of 128")
    assert created["detection_probability_1_fabricated"] == 1.0 and created["break_even_slash"] == 1
    status = ok(pool_main, "status", pool_id)
    assert status["status"] == "active" and status["budget"] == str(10_000 * 10**18)  # amounts as decimal strings
    assert ok(pool_main, "fund", pool_id, "5e18")["budget"] == str(10_005 * 10**18)
    refused(pool_main, "UnknownPool", 2, "status", "99")
    refused(pool_main, "cannot fund", 2, "fund", pool_id, "1e40")
    refused(pool_main, "expected 1", 2, "status", pool_id, "--chain-id", "1")
    refused(pool_main, "cannot reach", 1, "status", pool_id, "--rpc-url", "http://127.0.0.1:1")
    worker_key = load_devnet_info(checkout / ".devnet")["workers"][0]["private_key"]
    refused(pool_main, "NotPoolOwner", 1, "close", pool_id, "--key", worker_key)
    assert ok(pool_main, "close", pool_id)["refunded"] == str(10_005 * 10**18)
    refused(pool_main, f"pool {pool_id} is already closed", 2, "close", pool_id)
    for command in (["claim", "--pool", "999"], ["deallocate", "--pool", "999"], ["unstake", "--leave", "999"]):
        refused(worker_main, "UnknownPool", 2, *command, "--devnet-worker", "0")  # was exit 0 with an empty result
