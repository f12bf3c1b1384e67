"""The keeper's decisions (validator.keeper) on a fake ForcedErrors and court that refuse as the contract does: what it
settles, charges and reports once an epoch's window has closed, that an idle keeper asks nothing, that a refusal is
booked as done, and that a restart from its journal sends nothing twice."""

from __future__ import annotations

from types import SimpleNamespace

from ledger_client.chain import errors
from protocol.hashchain import Role, drawn
from protocol.pool import CaseState
from validator.court import CourtDuties
from validator.keeper import GRACE_S, Keeper

ME, JUDGE, LAZY, SILENT, WORKER, NO_CHAIN, SPENT = (f"0x{c * 40}" for c in "abcdef1")
EPOCH_S, WINDOW_CLOSES = 100, 500
"""Epoch e spans [100e, 100e + 100); its reveal window closes at 100e + 500."""
FORCED_LINK = bytes.fromhex("11" * 32)
BEACON = bytes.fromhex("33" * 32)
"""Epoch 0's beacon (R9.29), recorded unless a test says it is pending."""


def _forced_file(forced: bool, start: int = 0) -> bytes:
    """A work id the worker's revealed link says owes (or not) a forced error at forcedBps 1000."""
    i = start
    while True:
        w = i.to_bytes(32, "big")
        if drawn(FORCED_LINK, BEACON, w, 1000) == forced:
            return w
        i += 1


class FakeChain:
    """What the keeper uses of `AuditChain`: the epoch arithmetic, the pool's draw rate, and `fe`."""

    pool_id = 1
    params = SimpleNamespace(audit_bps=10_000)

    def __init__(self, fe):
        self.fe = fe

    def beacon(self, epoch: int) -> bytes | None:
        return None if self.fe.beacon_pending else BEACON

    def epoch(self, t: int) -> int:
        return t // EPOCH_S

    def reveal_window(self, epoch: int) -> tuple[int, int]:
        return epoch * EPOCH_S + 400, epoch * EPOCH_S + WINDOW_CLOSES


class FakeForcedErrors:
    """Refuses as ForcedErrors does: a settled file, a charged auditor, a reported epoch."""

    def __init__(self, court):
        self.court, self.sent, self.reads = court, [], 0
        self.links = {(WORKER, 0): FORCED_LINK}  # the validators' links: ME and JUDGE revealed, LAZY too, SILENT not
        for v in (ME, JUDGE, LAZY):
            self.links[v, 0] = bytes.fromhex("22" * 32)
        self.settled, self.charged, self.reported = set(), set(), set()
        self.beacon_pending = False

    def is_forced(self, w: bytes) -> bool:
        self.reads += 1
        if self.beacon_pending:
            raise errors.BeaconPending({"epoch": 0})
        link = self.links.get((self.court.workers[w], 0))
        if link is None:
            raise errors.NotRevealed({"account": self.court.workers[w], "epoch": 0})
        return drawn(link, BEACON, w, 1000)

    def get_chain(self, pool_id, role, account):
        self.reads += 1
        return SimpleNamespace(first_epoch=0 if account != NO_CHAIN else 5, end_epoch=255,
                               locked=0 if account == SPENT else 10)

    def link_of(self, pool_id, role, account, epoch):
        assert role == Role.VALIDATOR
        self.reads += 1
        return self.links.get((account, epoch), bytes(32))

    def settle(self, w, judge, disputer):
        if w in self.settled:
            raise errors.AlreadySettled({"workId": w})
        self.settled.add(w)
        self.sent.append(("settle", w))

    def charge_auditor(self, w, auditor):
        if (w, auditor) in self.charged:
            raise errors.NotChargeable({"workId": w, "auditor": auditor})
        self.charged.add((w, auditor))
        self.sent.append(("charge", w, auditor))

    def report_silence(self, pool_id, validator, epoch):
        if (validator, epoch) in self.reported:
            raise errors.NotSilent({"account": validator, "epoch": epoch})
        self.reported.add((validator, epoch))
        self.sent.append(("silence", validator, epoch))

    def credits(self, who):
        return 0


class FakeCourt:
    def __init__(self):
        self.workers, self.states = {}, {}

    def cases(self, w):
        state, accepted = self.states[w]
        return SimpleNamespace(state=state, accepted=accepted)


def _keeper(tmp_path, court, fe):
    duties = CourtDuties(tmp_path / "court.json")
    commits = lambda block: ([(v, 0, 255) for v in (ME, JUDGE, LAZY, SILENT)], block + 1)  # noqa: E731
    return Keeper(FakeChain(fe), court, duties.book, duties.save, ME, lambda *a: 0, commits), duties


def _file(court, keeper, w, worker=WORKER, accepted=True, judge=JUDGE, state=CaseState.FINAL):
    court.workers[w], court.states[w] = worker, (state, accepted)
    keeper.saw_verdict(w, 10, judge, accepted)


def test_an_idle_keeper_reads_nothing_and_nothing_is_sent_before_the_window_closes(tmp_path):
    court = FakeCourt()
    fe = FakeForcedErrors(court)
    keeper, _ = _keeper(tmp_path, court, fe)
    assert keeper.step(10_000) == {"settled": 0, "charged": 0, "reported": 0} and fe.reads == 0  # nothing booked
    _file(court, keeper, _forced_file(True))
    assert keeper.step(WINDOW_CLOSES) == {"settled": 0, "charged": 0, "reported": 0}
    assert fe.reads == 0 and fe.sent == []


def test_an_uncaught_forced_error_is_settled_its_drawn_auditors_charged_and_silence_reported_once(tmp_path):
    court = FakeCourt()
    fe = FakeForcedErrors(court)
    keeper, duties = _keeper(tmp_path, court, fe)
    uncaught, clean = _forced_file(True), _forced_file(False)
    _file(court, keeper, uncaught)
    _file(court, keeper, clean)
    sent = keeper.step(WINDOW_CLOSES + 1 + 2 * GRACE_S)
    # settled; charged: every drawn validator (auditBps 10000) but the judge and the keeper, the silent one included
    assert fe.sent == [("settle", uncaught), ("charge", uncaught, LAZY), ("charge", uncaught, SILENT),
                       ("silence", SILENT, 0)]
    assert sent == {"settled": 1, "charged": 2, "reported": 1}
    assert not duties.book.settle and not duties.book.charge and not duties.book.silence  # a clean file: no settle
    _file(court, keeper, uncaught)  # the events again (a cursor replay): the contract refuses, booked as done
    keeper.step(WINDOW_CLOSES + 100)
    assert len(fe.sent) == 4 and not duties.book.settle


def test_a_catcher_settles_at_once_and_others_after_their_grace(tmp_path):
    court = FakeCourt()
    fe = FakeForcedErrors(court)
    keeper, _ = _keeper(tmp_path, court, fe)
    ours, theirs = _forced_file(True), _forced_file(True, start=_forced_file_index(True) + 1)
    _file(court, keeper, ours, accepted=False, judge=ME)  # this validator challenged it: the jackpot is its
    _file(court, keeper, theirs, accepted=False, judge=JUDGE)  # another's catch: it settles first
    keeper.step(WINDOW_CLOSES + 1)
    assert [s for s in fe.sent if s[0] == "settle"] == [("settle", ours)]
    keeper.step(WINDOW_CLOSES + 1 + GRACE_S)
    assert [s for s in fe.sent if s[0] == "settle"] == [("settle", ours), ("settle", theirs)]
    assert not any(s[0] == "charge" for s in fe.sent)  # caught: no auditor let it stand


def _forced_file_index(forced: bool) -> int:
    return int.from_bytes(_forced_file(forced), "big")


def test_a_withheld_link_is_settled_unless_nothing_is_left_to_take_and_an_open_case_waits(tmp_path):
    court = FakeCourt()
    fe = FakeForcedErrors(court)
    keeper, duties = _keeper(tmp_path, court, fe)
    withheld, unchained, disputed = bytes([7]) * 32, bytes([8]) * 32, _forced_file(True)
    _file(court, keeper, withheld, worker="0x" + "77" * 20)  # its chain covers epoch 0, its link not revealed
    _file(court, keeper, unchained, worker=NO_CHAIN)  # no chain covers epoch 0: it owes nothing
    _file(court, keeper, bytes([6]) * 32, worker=SPENT)  # withheld, but its bond here is spent: nothing to take
    _file(court, keeper, disputed, state=CaseState.DISPUTED)  # a forced error whose dispute is still open
    keeper.step(WINDOW_CLOSES + 100)
    assert [s for s in fe.sent if s[0] == "settle"] == [("settle", withheld)]
    assert set(duties.book.settle) == {disputed.hex()}  # looked at again later
    court.states[disputed] = (CaseState.FINAL, False)
    keeper.step(WINDOW_CLOSES + 100)  # not before RECHECK_S
    assert set(duties.book.settle) == {disputed.hex()}
    keeper.step(WINDOW_CLOSES + 200)
    assert ("settle", disputed) in fe.sent and not duties.book.settle


def test_a_restart_from_the_journal_before_the_save_sends_nothing_twice(tmp_path):
    court = FakeCourt()
    fe = FakeForcedErrors(court)
    keeper, duties = _keeper(tmp_path, court, fe)
    uncaught = _forced_file(True)
    _file(court, keeper, uncaught)
    duties.save()
    before = (tmp_path / "court.json.log").read_bytes()
    keeper.step(WINDOW_CLOSES + 100)
    assert len(fe.sent) == 4
    (tmp_path / "court.json.log").write_bytes(before)  # killed after the transactions, before any save
    again, duties_again = _keeper(tmp_path, court, fe)
    assert uncaught.hex() in duties_again.book.settle
    again.step(WINDOW_CLOSES + 100)
    assert len(fe.sent) == 4  # every call refused as done: nothing sent twice
    assert not duties_again.book.settle and not duties_again.book.charge and not duties_again.book.silence
    restarted, duties_after = _keeper(tmp_path, court, fe)  # and what that step saved stays done
    restarted.step(WINDOW_CLOSES + 200)
    assert len(fe.sent) == 4 and not duties_after.book.silence


def test_a_pending_beacon_defers_the_settlement_and_then_it_is_sent(tmp_path):
    """An epoch whose beacon nobody recorded yet (R9.29): no draw can be known, so nothing is settled and nothing is
    dropped; once it is recorded, the next step after RECHECK_S settles as usual."""
    court = FakeCourt()
    fe = FakeForcedErrors(court)
    keeper, duties = _keeper(tmp_path, court, fe)
    uncaught = _forced_file(True)
    _file(court, keeper, uncaught)
    fe.beacon_pending = True
    keeper.step(WINDOW_CLOSES + 100)
    assert not any(s[0] in ("settle", "charge") for s in fe.sent) and uncaught.hex() in duties.book.settle
    fe.beacon_pending = False
    keeper.step(WINDOW_CLOSES + 200)
    assert ("settle", uncaught) in fe.sent and not duties.book.settle
