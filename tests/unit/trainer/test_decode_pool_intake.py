"""The trainer's ledger source with its files decoded in a pool of processes hands out exactly what it hands out decoding
them in its own process: the same batches, consumed (and logged) in the same order, the same files refused. The chain
and Kubo are fakes (as in test_ledger_source_court.py); the decoding is the real `decode_rollouts`."""

from __future__ import annotations

from types import SimpleNamespace

import trainer.ledger_source as ledger_source
from ledger_client.chain.bindings import WorkAccepted, WorkSubmitted
from protocol.pool import WorkStatus
from tests.unit.trainer.test_decode_pool import CORRUPT, rollout_file
from tests.unit.trainer.test_ledger_source_court import META, POOL, Heads, _Cursor
from trainer.consumed_log import read_consumed



def _events(files: dict[bytes, bytes]) -> list[object]:
    events: list[object] = []
    for digest in files:
        work_id = b"\x01" + digest[1:]
        events += [WorkSubmitted(POOL, work_id, "0xw", digest, 0, 0, 4, 1, META), WorkAccepted(POOL, work_id, "0xv", META)]
    return events


def _consume(monkeypatch, files: dict[bytes, bytes], decode_workers: int, log):
    """One poll of a ledger source over `files` (digest → bytes, in submission order), all accepted and final."""
    monkeypatch.setattr(ledger_source, "EventCursor", _Cursor)
    monkeypatch.setattr(ledger_source, "court_of", lambda *_: None)
    monkeypatch.setattr(ledger_source, "pool_state", lambda *_: SimpleNamespace(challenge_window_s=0))
    Heads(monkeypatch, timestamp=2**40)
    monkeypatch.setattr(ledger_source, "get_work",
                        lambda _ledger, _work_id: SimpleNamespace(status=WorkStatus.ACCEPTED, submitted_at=0))
    monkeypatch.setattr(ledger_source, "get_object", lambda _kubo, digest, timeout: files[digest])
    ledger = SimpleNamespace(deployment=SimpleNamespace(block=0), pool=None, w3=None, batches=None,
                             logs=SimpleNamespace(page_blocks=10_000))
    source = ledger_source.LedgerSource(ledger, kubo=None, pool_id=POOL, consumed_log=log,
                                        decode_workers=decode_workers)
    _Cursor.batches = [_events(files)]
    try:
        return source, source.poll()
    finally:
        source.close()


def test_a_pool_hands_out_the_same_batches_in_the_same_order_and_refuses_the_same_files(monkeypatch, tmp_path):
    files = {bytes([9, i]) * 16: rollout_file(i) for i in range(12)}
    for i, corrupt in enumerate(CORRUPT):  # accepted all the same: never trained on
        files[bytes([8, i]) * 16] = corrupt
    files[bytes([7, 0]) * 16] = rollout_file(100)  # after the refused ones
    serial, serial_items = _consume(monkeypatch, files, 0, tmp_path / "serial.log")
    pooled, pooled_items = _consume(monkeypatch, files, 3, tmp_path / "pooled.log")

    assert len(serial_items) == 13 and len(serial.unreadable) == len(CORRUPT)
    assert [item.id for item in pooled_items] == [item.id for item in serial_items]
    assert [item.batch for item in pooled_items] == [item.batch for item in serial_items]
    assert pooled.unreadable == serial.unreadable
    assert read_consumed(tmp_path / "pooled.log") == read_consumed(tmp_path / "serial.log") == [
        item.id for item in serial_items]
