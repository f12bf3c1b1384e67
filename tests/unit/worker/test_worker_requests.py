"""What a worker asks the chain a file (issue 46: ≤ 25 requests a file at 2 s blocks): the real `WorkerDaemon` main
loop on a stand-in chain and a fake clock, every read counted as the JSON-RPC requests it sends. The pool's state is read
once per `IDLE_LOOK_S` for the process (the prefetch thread's looks included), the member record and the pinning block
once a file, and the open submissions' verdicts `poll_interval_s` after a submission or a verdict, then at waits doubling
up to `IDLE_LOOK_S` — no head polling, at --max-pending or otherwise; the chain's clock for a claim only when a reward can
be due, or once a `CHAIN_TIME_CHECK_S`."""

from __future__ import annotations

import threading
from collections import Counter
from types import SimpleNamespace

import pytest

import ledger_client.chain.watch
import worker.daemon
from protocol.pool import Work, WorkStatus
from protocol.submission import local_binding
from worker.daemon import CHAIN_TIME_CHECK_S, IDLE_LOOK_S, PREFETCH_POLL_S, WorkerDaemon, WorkerOptions
from worker.pacing import Pacer
from worker.policy import Policy

WORKER = "0x" + "ab" * 20
TX_REQUESTS = 6.5
"""What one transaction costs at 2 s blocks, counted by bench.scale: an estimate, a nonce, a broadcast, ~2.5 receipt
asks (tests/unit/ledger_client/test_receipt_wait.py) and a fee quote of two when the last is older than a block."""


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class _Chain:
    """A pool at step 0 whose validator judges each file `verdict_s` after it is submitted; counts every request."""

    def __init__(self, clock: _Clock, verdict_s: float, reward_lock_s: int = 1_200) -> None:
        self.clock, self.verdict_s, self.reward_lock_s = clock, verdict_s, reward_lock_s
        self.requests: Counter = Counter()
        self.nonce, self.time_jump, self.latest = 0, 0, 0
        self.submitted_at: dict[bytes, float] = {}
        self.claimed: list[bytes] = []
        self.pool = SimpleNamespace(get_member=self.get_member, submit_work=self.submit_work)
        self.eth = SimpleNamespace(get_block=self.get_block)
        self.w3 = SimpleNamespace(eth=self.eth)
        self.deployment = SimpleNamespace(chain_id=31337, compute_pool="0x" + "cc" * 20)
        self.address = WORKER

    def chain_time(self) -> int:
        return int(self.clock.now) + self.time_jump

    def state(self, ledger=None, pool_id: int = 0) -> SimpleNamespace:
        self.requests["getPool"] += 1
        return SimpleNamespace(active=True, latest_step=self.latest, async_level=2, min_stake=100, slash_amount=50,
                               reward_lock_s=self.reward_lock_s)

    def get_member(self, pool_id: int, address: str) -> SimpleNamespace:
        self.requests["getMember"] += 1
        return SimpleNamespace(member=True, pinned_step=0, pinned_block=1, next_nonce=self.nonce, open_works=0,
                               allocation=10**30)

    def get_block(self, which) -> dict:
        self.requests["getBlock latest" if which == "latest" else "getBlock pin"] += 1
        return {"timestamp": self.chain_time()}

    def next_binding(self, ledger, pool_id: int, member) -> object:
        self.get_block(member.pinned_block)  # the pinning block's hash seeds the file
        return local_binding(WORKER, member.pinned_step, member.next_nonce)

    def submit_work(self, pool_id, step, nonce, digest, n_samples) -> None:
        self.requests["transactions"] += 1
        self.submitted_at[local_binding(WORKER, step, nonce).work_id] = self.clock.now
        self.nonce += 1

    def get_work(self, ledger, work_id: bytes) -> Work:
        self.requests["getWork"] += 1
        at = self.submitted_at[bytes(work_id)]
        status = WorkStatus.ACCEPTED if self.clock.now >= at + self.verdict_s else WorkStatus.PENDING
        return Work(work_id=bytes(work_id), worker=WORKER, pool_id=0, step=0, n_samples=8, submitted_at=int(at),
                    status=status, reward=8, nonce=0)

    def claim_works(self, ledger, work_ids: list[bytes], now: int | None = None) -> int:
        self.claimed += work_ids
        self.requests["transactions"] += 1
        return 8 * len(work_ids)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    clock = _Clock()
    monkeypatch.setattr(worker.daemon, "time", clock)
    monkeypatch.setattr(ledger_client.chain.watch, "time", clock)
    return clock


def _daemon(tmp_path, monkeypatch, chain: _Chain, generate_s: float, files: int, max_pending: int = 2) -> WorkerDaemon:
    monkeypatch.setattr(worker.daemon, "pool_created_in", lambda ledger, pool_id: b"\x01" * 32)
    monkeypatch.setattr(worker.daemon, "court_of", lambda ledger, pool_id: None)
    monkeypatch.setattr(worker.daemon, "pool_state", chain.state)
    monkeypatch.setattr(worker.daemon, "next_binding", chain.next_binding)
    monkeypatch.setattr(worker.daemon, "get_work", chain.get_work)
    monkeypatch.setattr(worker.daemon, "claim_works", chain.claim_works)
    daemon = WorkerDaemon(chain, WorkerOptions(pool_id=0, kubo_api="/ip4/127.0.0.1/tcp/1", work_dir=tmp_path,
                                               submissions_per_step=files, max_pending=max_pending, pace=False),
                          producer=None, loader=None, upload=lambda kubo, data: None)
    daemon.pool, daemon.spec, daemon.chain, daemon.pacer = chain.state(), None, None, Pacer(async_level=2)
    daemon.policy = Policy(0, b"\x00" * 32, None, None)

    def produce(policy, spec, binding) -> tuple[bytes, int]:
        _elapse(daemon, chain.clock, generate_s)
        return f"file {binding.nonce}".encode(), 8

    daemon.produce = produce
    chain.requests.clear()
    return daemon


def _elapse(daemon: WorkerDaemon, clock: _Clock, seconds: float) -> None:
    """Time passes; the prefetch thread looks at the process's watch every PREFETCH_POLL_S meanwhile (as in `run`)."""
    end = clock.now + seconds
    while clock.now < end:
        clock.now = min(end, clock.now + PREFETCH_POLL_S)
        daemon.watch.pool(IDLE_LOOK_S)


def _run(daemon: WorkerDaemon, clock: _Clock, until_s: float) -> None:
    """`WorkerDaemon.run`'s loop on the fake clock."""
    stop = threading.Event()
    while clock.now < until_s:
        did_work = daemon.step_once(stop, IDLE_LOOK_S)
        daemon.maybe_claim()
        if not did_work:
            _elapse(daemon, clock, max(daemon.pause_s(), 0.01))


def test_a_file_costs_the_pool_look_a_block_and_a_handful_of_reads(tmp_path, monkeypatch, clock) -> None:
    """20 s a file (bench.scale's pace), verdicts 3 blocks after each submission: 10 pool looks a file, one member record,
    one pinning block, ~one verdict read and one transaction — ≤ 25 with the transaction's requests."""
    chain = _Chain(clock, verdict_s=6.0)
    daemon = _daemon(tmp_path, monkeypatch, chain, generate_s=20.0, files=10)
    until_s = 10 * 20.0 + 20.0
    _run(daemon, clock, until_s)
    assert daemon.stats.submitted == 10 and daemon.stats.verdicts == {"accepted": 10}
    files, r = daemon.stats.submitted, chain.requests
    assert r["transactions"] == files and r["getMember"] <= files + 1 and r["getBlock pin"] == files
    assert r["getPool"] <= until_s / IDLE_LOOK_S + 1  # once per IDLE_LOOK_S, whatever the two threads ask
    # a look 0.5 s after each submission reads the file before (judged by then) and the new one; the last waits alone
    assert r["getWork"] <= 2 * files + 3 and r["getBlock latest"] <= 6  # the chain's clock: rewards due in 1,200 s
    per_file = (sum(r.values()) - r["transactions"] + TX_REQUESTS * r["transactions"]) / files
    assert per_file <= 25, dict(r)


def test_at_max_pending_the_worker_asks_only_for_its_verdicts_at_doubling_waits(tmp_path, monkeypatch, clock) -> None:
    """A slow validator (60 s a verdict): the worker, at --max-pending after two files, reads the two verdicts 0.5, 1.5,
    3.5 s after the last submission and then every IDLE_LOOK_S — no head polling, no member or pool reads between."""
    chain = _Chain(clock, verdict_s=60.0)
    daemon = _daemon(tmp_path, monkeypatch, chain, generate_s=1.0, files=10)
    _run(daemon, clock, until_s=50.0)
    assert daemon.stats.submitted == 2 and daemon._awaiting_verdicts
    waited = 50.0 - 2.0
    looks = 3 + (waited - 3.5) / IDLE_LOOK_S
    assert chain.requests["getWork"] <= 2 * (looks + 1)
    assert chain.requests["getMember"] == 2 and chain.requests["getPool"] <= 50.0 / IDLE_LOOK_S + 1
    assert set(chain.requests) == {"getPool", "getMember", "getBlock pin", "transactions", "getWork"}


def test_a_new_step_looks_at_the_verdicts_within_a_block_however_long_the_quiet_waits(tmp_path, monkeypatch,
                                                                                       clock) -> None:
    """Files made, two awaiting their verdicts: the quiet worker's looks drift apart to QUIET_VERDICT_LOOK_S; when a new
    step comes it is held at --max-pending, and looks again within IDLE_LOOK_S, not at the quiet look's time."""
    chain = _Chain(clock, verdict_s=45.0)
    daemon = _daemon(tmp_path, monkeypatch, chain, generate_s=0.0, files=2, max_pending=2)
    _run(daemon, clock, until_s=45.0)  # quiet looks 0.5, 1.5, 3.5, 7.5, 15.5, 31.5 s after; the next would be at 61.5
    assert daemon.stats.submitted == 2 and daemon._quiet_step == 0 and daemon._verdict_gap >= 16.0
    chain.latest = 1  # the trainer's next checkpoint, as the verdicts come
    _run(daemon, clock, until_s=45.0 + IDLE_LOOK_S + 1.0)
    assert daemon.stats.submitted == 4  # both verdicts read at one look, two more files sent


def test_a_verdict_on_a_devnet_that_mines_at_once_is_seen_within_a_poll_interval(tmp_path, monkeypatch, clock) -> None:
    """Verdicts 0.3 s after each submission (a devnet mining at every transaction): the worker at --max-pending 1 sees
    each one at its first look, poll_interval_s after the submission, and goes on at once."""
    chain = _Chain(clock, verdict_s=0.3)
    daemon = _daemon(tmp_path, monkeypatch, chain, generate_s=0.0, files=4, max_pending=1)
    submitted_at = []
    submit = chain.submit_work

    def timed(*args) -> None:
        submitted_at.append(clock.now)
        submit(*args)

    chain.pool.submit_work = timed
    _run(daemon, clock, until_s=5.0)
    assert daemon.stats.submitted == 4
    gaps = [b - a for a, b in zip(submitted_at, submitted_at[1:])]
    assert gaps == pytest.approx([daemon.opt.poll_interval_s] * 3, abs=0.02)
    assert chain.requests["getWork"] == 4  # one read each: the verdict is there at the first look


def test_the_chain_clock_is_read_for_a_claim_only_when_a_reward_can_be_due(tmp_path, monkeypatch, clock) -> None:
    """Accepted rewards unlocking in 1,200 s: the idle worker reads the chain's clock once a CHAIN_TIME_CHECK_S (it read
    it every claim interval, 5 s), claims once the lock has passed, and sees a devnet's jump at its next check."""
    chain = _Chain(clock, verdict_s=2.0, reward_lock_s=1_200)
    daemon = _daemon(tmp_path, monkeypatch, chain, generate_s=1.0, files=2)
    _run(daemon, clock, until_s=600.0)
    assert daemon.stats.verdicts == {"accepted": 2} and chain.claimed == []
    assert chain.requests["getBlock latest"] <= 600.0 / CHAIN_TIME_CHECK_S + 1
    reads = chain.requests["getBlock latest"]
    _run(daemon, clock, until_s=1_250.0)  # the lock passed by the wall clock too: claimed within a claim interval
    assert len(chain.claimed) == 2 and chain.requests["getBlock latest"] - reads <= 650.0 / CHAIN_TIME_CHECK_S + 12

    chain.claimed.clear()
    chain.requests.clear()
    daemon.journal.record(2, 0, digest="00" * 32, work_id=local_binding(WORKER, 0, 2).work_id.hex(), file="-",
                          n_samples=8)
    daemon.journal.advance(2, "submitted", final="accepted", submitted_at=int(clock.now))
    chain.submitted_at[local_binding(WORKER, 0, 2).work_id] = clock.now
    chain.time_jump = 1_300  # `devnet advance 1300`
    _run(daemon, clock, until_s=clock.now + CHAIN_TIME_CHECK_S + 6.0)
    assert len(chain.claimed) == 1


def test_a_submission_a_reorg_dropped_is_found_at_the_next_member_read(tmp_path, monkeypatch, clock) -> None:
    """The verdict looks stop at the oldest file still awaiting its verdict, so a reorg that dropped a newer one is
    seen where the worker reads its member record anyway: the chain's next nonce is one the journal holds as submitted.
    Then every open submission is read, and the vanished one goes to recover() (which resubmits it)."""
    from ledger_client.chain.errors import UnknownWork

    chain = _Chain(clock, verdict_s=600.0)
    daemon = _daemon(tmp_path, monkeypatch, chain, generate_s=1.0, files=10, max_pending=3)
    stop = threading.Event()
    assert daemon.step_once(stop, IDLE_LOOK_S) and daemon.step_once(stop, IDLE_LOOK_S)
    dropped = local_binding(WORKER, 0, 1).work_id
    chain.nonce = 1  # the reorg: the second submission is gone
    read = chain.get_work

    def get_work(ledger, work_id: bytes) -> Work:
        if bytes(work_id) == dropped:
            chain.requests["getWork"] += 1
            raise UnknownWork({"workId": work_id}, "getWork")
        return read(ledger, work_id)

    recovered = []
    monkeypatch.setattr(worker.daemon, "get_work", get_work)
    monkeypatch.setattr(daemon, "recover", lambda: recovered.append(daemon.journal.entries()[1]["stage"]))
    clock.now += 0.1  # before the next verdict look is due
    chain.requests.clear()
    daemon.step_once(stop, IDLE_LOOK_S)
    assert recovered == ["uploaded"]  # handed to recover() with its file, to be submitted again with its nonce
    assert chain.requests["getWork"] >= 2  # both open submissions read, not only the oldest
