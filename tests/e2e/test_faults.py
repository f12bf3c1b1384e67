"""Faults: kill -9 of the validator, a worker crash mid-upload, a chain reorg during a run, a
Kubo restart mid-fetch, and a kill -9 of the trainer. Nothing is lost, nothing counted twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import torch

from deploy.kubo_node import KuboNode
from ledger_client.chain.queries import get_work, wait_for
from ledger_client.ipfs.checkpoints import fetch_checkpoint, load_state_dict, publish_checkpoint
from ledger_client.ipfs.kubo import KuboClient, KuboError
from protocol.digest import WorkId
from protocol.pool import WorkStatus
from tests.e2e.test_protocol import Protocol
from tests.support.paths import ROOT
from trainer.consumed_log import read_consumed


@pytest.fixture
def protocol(tmp_path, kubo_node):
    p = Protocol(tmp_path, kubo_node)
    yield p
    p.close()


def _verdicts(protocol: Protocol) -> Counter:
    events = protocol.ledger(0).pool.contract.events
    ids = [bytes(e["args"]["workId"]) for e in events.WorkAccepted.get_logs(from_block=0)]
    ids += [bytes(e["args"]["workId"]) for e in events.WorkChallenged.get_logs(from_block=0)]
    return Counter(ids)


def _submit(protocol: Protocol, worker_index: int, n: int) -> list[bytes]:
    daemon = protocol.worker(worker_index, per_step=n)
    stop = threading.Event()
    for _ in range(n):
        assert daemon.step_once(stop)
    return [bytes.fromhex(e["work_id"]) for e in daemon.journal.entries("submitted")]


def _cli(protocol: Protocol, module: str, *args: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    chain = ["--rpc-url", protocol.anvil.rpc_url, "--deployments", str(protocol.deployments),
             "--kubo-api", protocol.kubo_api]
    return subprocess.Popen([sys.executable, "-m", module, *args, *chain], cwd=ROOT, env=env,
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)


def _kill9(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)  # the whole group: the daemon and its checker processes
    proc.wait(10)


def test_validator_killed_mid_verification_judges_every_submission_exactly_once(protocol, tmp_path):
    digests = _submit(protocol, 4, 3) + _submit(protocol, 5, 3)
    key = protocol.accounts[3].key.to_0x_hex()
    args = ["start", "--pool", str(protocol.pool_id), "--key", key, "--state-dir", str(tmp_path / "v"),
            "--max-in-flight", "1"]
    # the test mines the blocks while the first daemon runs, so it kills it in the block that holds its first
    # verdict, however fast the machine: no later transaction of the daemon is mined before the kill
    rpc = protocol.w3.provider.make_request
    rpc("evm_setAutomine", [False])
    first = _cli(protocol, "validator.cli", *args, log=tmp_path / "validator.log")

    def mine_until_a_verdict() -> bool:
        rpc("evm_mine", [])
        return sum(_verdicts(protocol).values()) >= 1

    assert wait_for(mine_until_a_verdict, timeout=120, interval=0.05), (tmp_path / "validator.log").read_text()
    _kill9(first)
    judged_before_restart = sum(_verdicts(protocol).values())
    rpc("evm_setAutomine", [True])
    rpc("evm_mine", [])  # whatever the killed daemon left in the mempool
    second = _cli(protocol, "validator.cli", *args, log=tmp_path / "validator.log")
    try:
        assert wait_for(lambda: all(get_work(protocol.ledger(0), d).status != WorkStatus.PENDING for d in digests),
                        timeout=180), (tmp_path / "validator.log").read_text()[-2000:]
    finally:
        second.send_signal(signal.SIGINT)  # Ctrl-C: a clean stop, reported as interrupted
        assert second.wait(30) == 130
    verdicts = _verdicts(protocol)
    assert sorted(verdicts) == sorted(digests) and set(verdicts.values()) == {1}
    assert judged_before_restart < len(digests)  # the kill really happened mid-run


def test_worker_crashing_mid_upload_gets_no_reward_until_its_file_is_fetchable(protocol):
    daemon = protocol.worker(4)
    calls = []

    def crash_during_upload(kubo, data):
        calls.append(len(data))
        raise KeyboardInterrupt  # the process dies here: the file is written locally, not uploaded

    daemon.upload = crash_during_upload
    with pytest.raises(KeyboardInterrupt):
        daemon.step_once(threading.Event())
    (entry,) = daemon.journal.entries()
    assert entry["stage"] == "written"
    work_id = bytes.fromhex(entry["work_id"])
    with pytest.raises(Exception, match="UnknownWork"):
        get_work(protocol.ledger(0), work_id)  # nothing on-chain: no reward possible for an unfetchable file

    restarted = protocol.worker(4)  # recover() uploads, then submits — once
    (entry,) = restarted.journal.entries()
    assert entry["stage"] == "submitted"
    validator = protocol.validator()
    try:
        assert validator.run_once() == 1
    finally:
        validator.close()
    assert get_work(protocol.ledger(0), work_id).status == WorkStatus.ACCEPTED
    assert _verdicts(protocol) == Counter({work_id: 1})


@pytest.mark.parametrize("mined", [False, True], ids=["before-submit", "after-submit-mined"])
def test_worker_crashing_between_upload_and_journal_skips_and_reuses_no_nonce(protocol, mined):
    """A crash after the upload — before `submitWork` is sent, or after it is mined but before the journal
    says so — is recovered from the chain's next nonce: the file is submitted exactly once, with its nonce."""
    daemon = protocol.worker(4, per_step=2)
    real_submit = daemon.ledger.pool.submit_work

    def crash_at_submit(*args):
        if mined:
            real_submit(*args)
        raise KeyboardInterrupt

    daemon.ledger.pool.submit_work = crash_at_submit
    with pytest.raises(KeyboardInterrupt):
        daemon.step_once(threading.Event())
    (entry,) = daemon.journal.entries()
    assert (entry["stage"], entry["nonce"]) == ("uploaded", 0)
    restarted = protocol.worker(4, per_step=2)  # recover(): submits nonce 0 unless the chain already has it
    member = protocol.ledger(0).pool.get_member(protocol.pool_id, protocol.accounts[4].address)
    assert member.next_nonce == 1 and member.open_works == 1
    assert [e["stage"] for e in restarted.journal.entries()] == ["submitted"]
    assert restarted.step_once(threading.Event())  # the next submission takes the next nonce
    assert [e["nonce"] for e in restarted.journal.entries("submitted")] == [0, 1]
    work_ids = [bytes.fromhex(e["work_id"]) for e in restarted.journal.entries("submitted")]
    assert [get_work(protocol.ledger(0), w).nonce for w in work_ids] == [0, 1]


def test_reorg_during_a_run_double_counts_nothing(protocol):
    worker = protocol.worker(4, per_step=2)
    stop = threading.Event()
    assert worker.step_once(stop)
    validator = protocol.validator()
    try:
        assert validator.run_once() == 1
        assert worker.step_once(stop)  # a second submission, in the newest block
        (second,) = [bytes.fromhex(e["work_id"]) for e in worker.journal.entries("submitted")][1:]
        assert protocol.w3.provider.make_request("anvil_reorg", [3, []]).get("error") is None
        # The reorg dropped the second submission (and possibly the first verdict).
        worker.pending_verdicts()  # notices the vanished submission: resubmits it, or drops it if its pin moved
        if not any(e["work_id"] == second.hex() for e in worker.journal.entries("submitted")):
            assert worker.step_once(stop)  # the reorg moved the block that pinned the nonce: its file is made again
        assert get_work(protocol.ledger(0), second).status == WorkStatus.PENDING
        while validator.run_once():
            pass
    finally:
        validator.close()
    verdicts = _verdicts(protocol)
    assert set(verdicts.values()) == {1}
    assert all(get_work(protocol.ledger(0), d).status == WorkStatus.ACCEPTED for d in verdicts)
    assert second in verdicts


def test_kubo_restart_mid_fetch_resumes_without_refetching_verified_shards(tmp_path):
    node = KuboNode.start(tmp_path / "kubo", offline=True)
    try:
        state = {f"layer{i}.weight": torch.randn(64, 64, generator=torch.Generator().manual_seed(i)) for i in range(6)}
        with KuboClient(node.api_multiaddr) as kubo:
            published = publish_checkpoint(kubo, state, step=1, shard_bytes=20_000)

        class StopKuboAfterFirstShard:
            def start(self, total_bytes, total_files): ...
            def advance(self, n): ...
            def file_done(self, name):
                node.stop()  # Kubo goes away mid-fetch

        with KuboClient(node.api_multiaddr, timeout=5) as kubo, pytest.raises(KuboError):
            fetch_checkpoint(kubo, published.digest, tmp_path / "store", parallel=1, retries=0,
                             progress=StopKuboAfterFirstShard())
        node = KuboNode.start(tmp_path / "kubo", offline=True)  # restarted, new port
        with KuboClient(node.api_multiaddr) as kubo:
            resumed = fetch_checkpoint(kubo, published.digest, tmp_path / "store")
        assert len(resumed.reused) >= 1 and resumed.downloaded
        loaded = load_state_dict(resumed)
        assert all(torch.equal(loaded[k], v) for k, v in state.items())
    finally:
        node.stop()


@pytest.mark.slow
def test_trainer_killed_resumes_with_no_rollout_consumed_twice_or_skipped(protocol, tmp_path):
    run_dir = tmp_path / "trainer"
    key = protocol.accounts[2].key.to_0x_hex()
    args = ["start", "--pool", str(protocol.pool_id), "--key", key, "--set", f"run_dir={run_dir}",
            "--set", "max_steps=4", "--set", "batch_samples=8", "--set", "wait_timeout_s=120", "--json",
            "--no-wait-final"]  # W is an hour; finality: test_trainer_finality.py
    workers = [protocol.worker(i, per_step=3) for i in (4, 5)]
    validator = protocol.validator()
    stop = threading.Event()
    errors: list[BaseException] = []

    def produce_and_judge():
        try:
            while not stop.is_set():
                for w in workers:
                    w.step_once(stop)
                validator.run_once()
                time.sleep(0.2)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)
            raise

    helper = threading.Thread(target=produce_and_judge, daemon=True)
    helper.start()
    consumed_file = run_dir / "consumed.json"
    try:
        first = _cli(protocol, "trainer.main", *args, log=tmp_path / "trainer.log")
        assert wait_for(lambda: consumed_file.exists() and json.loads(consumed_file.read_text())["step"] >= 2,
                        timeout=240), (errors, (tmp_path / "trainer.log").read_text()[-2000:])
        _kill9(first)
        second = _cli(protocol, "trainer.main", *args, log=tmp_path / "trainer.log")
        assert second.wait(300) == 0, (tmp_path / "trainer.log").read_text()[-2000:]
    finally:
        stop.set()
        helper.join(60)
        validator.close()
    state = json.loads(consumed_file.read_text())
    consumed = read_consumed(run_dir / state["consumed_log"])  # every work id taken, in order, across the kill
    assert len(consumed) == len(set(consumed)) >= state["consumed"]  # nothing consumed twice
    events = protocol.ledger(0).pool.contract.events.WorkAccepted.get_logs(from_block=0)
    accepted_in_order = [WorkId(e["args"]["workId"]).text for e in events]
    last = max(accepted_in_order.index(w) for w in consumed)
    skipped = [w for w in accepted_in_order[: last + 1] if w not in consumed and w not in state["pending"]]
    assert skipped == []  # every accepted submission up to the last one taken was taken (or is queued)
    published = [protocol.ledger(0).pool.checkpoint_at(protocol.pool_id, s) for s in range(1, 5)]
    assert all(bytes(p) != bytes(32) for p in published)  # steps 1..4 all published once, in order
