"""The trainer's ledger source in a court pool, final mode: the pool's `WorkAccepted` is the court's final verdict,
so the work is consumed without reading its status again — unless a reorg was seen since its event. The chain and
Kubo are fakes here; tests/e2e/test_court_finality.py and tests/e2e/test_court_validators.py run the same source against
anvil, Kubo and validator daemons."""

from __future__ import annotations

from types import SimpleNamespace

import trainer.ledger_source as ledger_source
from ledger_client.chain.bindings import WorkAccepted, WorkChallenged, WorkSubmitted
from ledger_client.chain.contract import EventMeta
from ledger_client.chain.events import Removed
from protocol.pool import CaseState, WorkStatus
from protocol.rollouts import RolloutBatch
from trainer.consumed_log import read_consumed

POOL = 1
META = EventMeta(block_number=1, block_hash=b"\0" * 32, tx_hash=b"\0" * 32, log_index=0, address="0x0")


class _Cursor:
    """Hands out the events queued in `batches`, one batch per poll."""

    batches: list[list[object]] = []

    def __init__(self, *_args: object, **_kwargs: object) -> None:
        self.state: dict = {}

    def poll(self, _latest: object) -> list[object]:
        return _Cursor.batches.pop(0) if _Cursor.batches else []


class Heads:
    """The chain stand-in's head (`latest_block`): a new block at each read, or the same one while `frozen`."""

    def __init__(self, monkeypatch, timestamp: int = 0) -> None:
        self.number, self.frozen, self.timestamp = 0, False, timestamp
        monkeypatch.setattr(ledger_source, "latest_block", self.read)

    def read(self, _w3: object) -> dict:
        self.number += not self.frozen
        return {"number": self.number, "hash": self.number.to_bytes(32, "big"), "timestamp": self.timestamp}


def _source(monkeypatch, status: WorkStatus, consumed_log=None) -> tuple[ledger_source.LedgerSource, list[bytes]]:
    reads: list[bytes] = []
    monkeypatch.setattr(ledger_source, "EventCursor", _Cursor)
    court = SimpleNamespace(cases=lambda _work_id: SimpleNamespace(state=CaseState.VERDICT, accepted=True))
    monkeypatch.setattr(ledger_source, "court_of", lambda *_: court)
    monkeypatch.setattr(ledger_source, "pool_state", lambda *_: SimpleNamespace(challenge_window_s=60))
    Heads(monkeypatch)
    monkeypatch.setattr(ledger_source, "get_work",
                        lambda _ledger, work_id: reads.append(work_id) or SimpleNamespace(status=status))
    monkeypatch.setattr(ledger_source, "get_object", lambda _kubo, digest, timeout: digest)
    monkeypatch.setattr(ledger_source, "decode_rollouts", lambda _data: RolloutBatch.model_construct())
    ledger = SimpleNamespace(deployment=SimpleNamespace(block=0), pool=None, w3=None,
                             logs=SimpleNamespace(page_blocks=10_000))
    return ledger_source.LedgerSource(ledger, kubo=None, pool_id=POOL, consumed_log=consumed_log), reads


def _submitted_and_accepted(work_id: bytes) -> list[object]:
    return [WorkSubmitted(POOL, work_id, "0xw", b"\xaa" * 32, 0, 0, 128, 1, META),
            WorkAccepted(POOL, work_id, "0xv", META)]


def test_a_final_acceptance_is_consumed_without_a_status_read(monkeypatch):
    source, reads = _source(monkeypatch, WorkStatus.ACCEPTED)
    _Cursor.batches = [_submitted_and_accepted(b"\x01" * 32)]
    assert [item.id for item in source.poll()] == ["0x" + "01" * 32]
    assert reads == []


def test_after_a_reorg_an_acceptance_is_read_again_before_it_is_consumed(monkeypatch):
    source, reads = _source(monkeypatch, WorkStatus.PENDING)  # the reorg undid the final verdict
    unfetched = b"\x02" * 32
    monkeypatch.setattr(ledger_source, "get_object", lambda *_args, **_kwargs: (_ for _ in ()).throw(
        ledger_source.ContentError("not served yet")))
    _Cursor.batches = [_submitted_and_accepted(unfetched), [Removed("0xtx:1", 1)]]
    assert source.poll() == [] and source.pending == ["0x" + "02" * 32]  # accepted, its file not served yet
    assert reads == []
    source._unfetched.clear()  # its retry is due
    assert source.poll() == [] and source.pending == ["0x" + "02" * 32]  # read again: pending, so it waits
    assert reads == [unfetched]


def test_consumed_work_is_logged_and_a_resume_hands_out_only_what_the_checkpoint_had_not(monkeypatch, tmp_path):
    log = tmp_path / "consumed.log"
    source, _ = _source(monkeypatch, WorkStatus.ACCEPTED, consumed_log=log)
    first, second = b"\x01" * 32, b"\x02" * 32
    _Cursor.batches = [_submitted_and_accepted(first), _submitted_and_accepted(second)]
    assert [item.id for item in source.poll()] == ["0x" + "01" * 32]
    checkpoint = source.state()  # the trainer's checkpoint: the log's count, not its ids
    assert checkpoint["consumed_log"] == {"entries": 1} and "consumed" not in checkpoint
    assert [item.id for item in source.poll()] == ["0x" + "02" * 32]  # then killed before the next checkpoint

    resumed, _ = _source(monkeypatch, WorkStatus.ACCEPTED, consumed_log=log)
    resumed.restore(checkpoint)
    assert "0x" + "02" * 32 not in resumed.consumed and len(resumed.consumed) == 1
    _Cursor.batches = [_submitted_and_accepted(first), _submitted_and_accepted(second)]  # the cursor re-reads both
    assert [item.id for item in resumed.poll()] == []  # the first was consumed before the checkpoint
    assert [item.id for item in resumed.poll()] == ["0x" + "02" * 32]
    assert read_consumed(log) == ["0x" + "01" * 32, "0x" + "02" * 32]


def test_a_poll_at_the_head_already_read_asks_the_chain_nothing_more(monkeypatch):
    """Work waiting out its challenge window is not read at every poll (the trainer polls every 0.1 s), and the
    window is judged by the head's own timestamp."""
    source, reads = _source(monkeypatch, WorkStatus.ACCEPTED)
    monkeypatch.setattr(source, "court", None)  # a permissioned pool: final once the 60 s window has passed
    monkeypatch.setattr(ledger_source, "get_work", lambda _ledger, work_id: reads.append(work_id) or
                        SimpleNamespace(status=WorkStatus.ACCEPTED, submitted_at=1_000))
    heads = Heads(monkeypatch, timestamp=1_000)
    _Cursor.batches = [_submitted_and_accepted(b"\x03" * 32)]
    assert source.poll() == [] and reads == [b"\x03" * 32]
    heads.frozen = True
    assert source.poll() == [] and source.poll() == [] and reads == [b"\x03" * 32]
    heads.frozen, heads.timestamp = False, 1_061
    assert [item.id for item in source.poll()] == ["0x" + "03" * 32] and reads == [b"\x03" * 32] * 2


def _permissioned(monkeypatch, wait_final: bool) -> tuple[ledger_source.LedgerSource, list[bytes], dict, Heads]:
    source, reads = _source(monkeypatch, WorkStatus.ACCEPTED)
    monkeypatch.setattr(source, "court", None)  # a permissioned pool: final once the 60 s window has passed
    monkeypatch.setattr(source, "wait_final", wait_final)
    status: dict[bytes, WorkStatus] = {}
    monkeypatch.setattr(ledger_source, "get_work", lambda _ledger, work_id: reads.append(work_id) or
                        SimpleNamespace(status=status.get(work_id, WorkStatus.ACCEPTED), submitted_at=1_000))
    return source, reads, status, Heads(monkeypatch, timestamp=1_000)


def _challenged(work_id: bytes) -> list[object]:
    return [WorkChallenged(POOL, work_id, "0xv", 7, b"\x01" * 32, 0, META)]


def test_work_inside_its_window_is_read_again_only_when_challenged_or_when_the_window_has_passed(monkeypatch):
    """A permissioned pool's accepted work is not read at every new block while its window is open (issue 47): the
    pool's `WorkChallenged` has it read at once; otherwise it is read once more when the window has passed."""
    source, reads, status, heads = _permissioned(monkeypatch, wait_final=True)
    first, second = b"\x04" * 32, b"\x05" * 32
    _Cursor.batches = [_submitted_and_accepted(first), _submitted_and_accepted(second)]
    assert source.poll() == [] and source.poll() == [] and reads == [first, second]
    for timestamp in (1_010, 1_030):  # new blocks, the window still open
        heads.timestamp = timestamp
        assert source.poll() == []
    assert reads == [first, second]
    status[first] = WorkStatus.REJECTED
    _Cursor.batches = [_challenged(first)]
    assert source.poll() == [] and source.skipped == ["0x" + "04" * 32] and reads == [first, second, first]
    heads.timestamp = 1_060
    assert source.poll() == [] and reads == [first, second, first]  # the window ends at 1,060: still open
    heads.timestamp = 1_061
    assert [item.id for item in source.poll()] == ["0x" + "05" * 32] and reads == [first, second, first, second]
    assert source._window_ends == {}


def test_fast_mode_reads_consumed_work_again_only_when_challenged_or_when_its_window_has_passed(monkeypatch):
    source, reads, status, heads = _permissioned(monkeypatch, wait_final=False)
    kept, overruled = b"\x06" * 32, b"\x07" * 32
    _Cursor.batches = [_submitted_and_accepted(kept) + _submitted_and_accepted(overruled)]
    assert len(source.poll()) == 2 and len(source.unsettled) == 2 and reads == [kept, overruled]
    heads.timestamp = 1_020
    source.poll()
    assert reads == [kept, overruled]
    status[overruled] = WorkStatus.REJECTED
    _Cursor.batches = [_challenged(overruled)]
    source.poll()
    assert source.overturned == ["0x" + "07" * 32] and source.unsettled == ["0x" + "06" * 32]
    assert reads == [kept, overruled, overruled]
    heads.timestamp = 1_061
    source.poll()
    assert source.unsettled == [] and source.overturned == ["0x" + "07" * 32]
    assert reads == [kept, overruled, overruled, kept]
