"""A validator judges a pool's workers with the pool's own honest spread (docs/protocol.md R6.18, R6.19): the run
spec's k and c reach the null every file is checked under and the factor its worker's book keeps; a restart replays
the same book; a book whose factors met another spread counts its files again under the pool's (and a replay does
the same); and two pools one validator serves keep their books apart."""

from __future__ import annotations

import json
import tomllib

import pytest

from proofs.margins import FACTOR_VERSION, MarginNull, log_e_value
from protocol.runspec import RunSpec
from tests.support.paths import ROOT
from validator import state_journal
from validator.checks import verify_config_of
from validator.state_journal import log_path
from validator.worker_margins import LEGACY_BOOK, WorkerMargins, book_path

WORKER = "0x" + "ab" * 20
TAIL = [9.6e-4, 9.0e-4, 7.9e-4, 4.7e-4, 3.2e-5, 3.2e-5]
NEVER = 1e-300
"""A worker false-positive rate no e-value here reaches: every file stays open."""


def pool_spec(k: float, c: float) -> RunSpec:
    doc = tomllib.loads((ROOT / "examples" / "run.toml").read_text())
    doc["verification"] |= {"margin_tail": TAIL, "spread_shape": k, "miscalibration": c}
    return RunSpec.model_validate(doc)


def pool_null(k: float, c: float) -> MarginNull:
    """The null a validator's checker puts in an accepted file's outcome (validator.checks), as the daemon reads it
    back (validator.daemon: MarginNull(**margins["null"]))."""
    return MarginNull(**verify_config_of(pool_spec(k, c)).margin_null.model_dump())


def test_the_checkers_null_carries_the_pools_spread():
    null = pool_null(0.25, 3.0)
    assert (null.spread_shape, null.miscalibration) == (0.25, 3.0)
    assert null == pool_spec(0.25, 3.0).verification.margin_null()


def test_a_book_keeps_each_files_factor_under_the_pools_spread_and_a_restart_replays_it(tmp_path, monkeypatch):
    monkeypatch.setattr(state_journal, "COMPACT_MIN_BYTES", 3_000)
    path, null = tmp_path / "book.json", pool_null(0.25, 3.0)
    book = WorkerMargins(path)
    files = [(f"0x{k:02x}", 512, 0.25 * (k % 3)) for k in range(40)]
    for work_id, tokens, score in files:
        assert book.judge(WORKER, work_id, [tokens], score, null, NEVER) is None
    kept = book.workers[WORKER]
    assert (kept["factors"], kept["spread"]) == (FACTOR_VERSION, [0.25, 3.0])
    assert kept["open"]["0x05"][2] == pytest.approx(null.worker_log_terms(0.5, [512]))
    assert kept["open"]["0x05"][2] != pytest.approx(pool_null(0.5, 2.0).worker_log_terms(0.5, [512]))
    assert path.exists() and log_path(path).exists()  # compacted once, and logged since
    after = WorkerMargins(path)
    assert after.workers == book.workers
    assert after.log_e_value(WORKER, null) == book.log_e_value(WORKER, null)


def test_a_book_of_another_spread_counts_its_files_again_under_the_pools_and_a_replay_agrees(tmp_path):
    """A book whose factors were computed under the default spread (as every book before the run spec stated it),
    met by a judgement under the pool's k = 0.25, c = 3: its open files keep [tokens, score] and count under the
    pool's null; the log says so, so a restart comes back to the same book."""
    path = tmp_path / "book.json"
    default, pools = pool_null(0.5, 2.0), pool_null(0.25, 3.0)
    old = {WORKER: {"open": {"0x01": [512, 1.0, default.worker_log_terms(1.0, [512])]}, "challenged": {},
                    "factors": FACTOR_VERSION}}  # no "spread": written under the defaults
    path.write_text(json.dumps(old))
    book = WorkerMargins(path)
    book.judge(WORKER, "0x02", [512], 0.5, pools, NEVER)
    assert book.workers[WORKER]["open"]["0x01"] == [512, 1.0]
    terms = [a + b for a, b in zip(pools.worker_log_terms(1.0, [512]), pools.worker_log_terms(0.5, [512]))]
    assert book.log_e_value(WORKER, pools) == pytest.approx(log_e_value(terms))
    after = WorkerMargins(path)
    assert after.workers == book.workers
    assert after.log_e_value(WORKER, pools) == book.log_e_value(WORKER, pools)


def test_two_pools_in_one_state_folder_keep_their_books_apart(tmp_path):
    """A worker in two pools of one validator, with different spreads: each pool's book holds its own files under its
    own spread, and a challenge in one spends nothing of the other. A folder's book from before books were kept per
    pool becomes the first pool's."""
    legacy = {WORKER: {"open": {"0x01": [512, 0.0]}, "challenged": {}}}
    (tmp_path / LEGACY_BOOK).write_text(json.dumps(legacy))
    first, second = book_path(tmp_path, 1), book_path(tmp_path, 2)
    assert first != second and not (tmp_path / LEGACY_BOOK).exists()
    one, two = WorkerMargins(first), WorkerMargins(second)
    assert set(one.workers[WORKER]["open"]) == {"0x01"} and two.workers == {}
    loose, tight = pool_null(0.1, 4.0), pool_null(2.0, 1.0)
    for k in range(3):
        one.judge(WORKER, f"0x1{k}", [512], 1.0, loose, NEVER)
        two.judge(WORKER, f"0x2{k}", [512], 1.0, tight, NEVER)
    assert set(one.workers[WORKER]["open"]) == {"0x01", "0x10", "0x11", "0x12"}
    assert set(two.workers[WORKER]["open"]) == {"0x20", "0x21", "0x22"}
    assert one.workers[WORKER]["spread"] == [0.1, 4.0] and two.workers[WORKER]["spread"] == [2.0, 1.0]
    evidence = two.judge(WORKER, "0x23", [512], 6.0, tight, 1e-3)
    assert evidence is not None and evidence["spread"] == [2.0, 1.0] and evidence["files"] == 4
    assert set(WorkerMargins(book_path(tmp_path, 1)).workers[WORKER]["open"]) == {"0x01", "0x10", "0x11", "0x12"}
    assert WorkerMargins(book_path(tmp_path, 2)).workers[WORKER]["open"] == {}


def test_a_kill_between_the_legacy_books_two_moves_loses_nothing(tmp_path):
    """The log moves first: a folder found with the pool's log and the old snapshot finishes the move."""
    legacy = tmp_path / LEGACY_BOOK
    legacy.write_text(json.dumps({WORKER: {"open": {"0x01": [512, 0.0]}, "challenged": {}}}))
    pool = tmp_path / "worker_margins.pool7.json"
    log_path(pool).write_text(json.dumps({"seq": 1, "worker": WORKER, "work_id": "0x02", "file": [512, 0.5]}) + "\n")
    assert book_path(tmp_path, 7) == pool and not legacy.exists()
    assert set(WorkerMargins(pool).workers[WORKER]["open"]) == {"0x01", "0x02"}
