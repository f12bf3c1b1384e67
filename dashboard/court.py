"""The court's side of the explorer: cases, disputes, committees, votes, validators' bonds, penalties and fees.

Everything here is derived from the ValidatorCourt's events in the index (and the StakeManager's and the
ComputePool's of the same transactions), so it follows reorgs as the index does; the values the court computes
and keeps (a validator's locked and reserved stake, its credits, a pool's fee budget) are also read live from
its getters, and `locked_from_events` next to the live `locked` shows that the two agree. No contract
arithmetic is re-implemented beyond adding up what events say was moved.

Penalty reasons (`ValidatorPenalized.why`) and void reasons (`CaseVoided.why`) are the contract's codes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from eth_utils import keccak
from web3 import Web3

from dashboard.chain_source import ZERO_ADDRESS
from dashboard.common import NotFound, address_of, page, reason_name, work_id_of
from dashboard.models import (
    Assignment,
    At,
    AtFields,
    BondWithdrawn,
    CaseCounts,
    CaseSummary,
    Committee,
    CommitteeCounts,
    Court,
    CourtCase,
    CourtParams,
    CourtValidator,
    Credit,
    CreditKind,
    Deadlines,
    Dispute,
    DisputeCounts,
    DisputesFiled,
    EarningPoint,
    FinalOutcome,
    FirstVerdict,
    Page,
    Payment,
    Penalty,
    PoolVerdictEvent,
    Registration,
    Reopened,
    Reserved,
    ReservedCase,
    Resolution,
    SeedInputs,
    Validator,
    ValidatorCounts,
    ValidatorEarnings,
    ValidatorInPool,
    ValidatorVerdict,
    VerdictCounts,
    VoidOutcome,
    Vote,
    Withdrawal,
    WorkerSlash,
)
from dashboard.store import Row

PENALTY_WHY = {1: "wrong verdict", 2: "lost dispute", 3: "no vote revealed", 4: "silence (assigned, no verdict)",
               5: "voted with the minority"}
VOID_WHY = {1: "nobody judged within the verdict window", 2: "no committee member revealed a vote"}
CASE_STATES = ("pending", "verdict", "disputed", "final", "void")
LOCK_EVENTS = ("ValidatorRegistered", "BondAdded", "ValidatorPenalized", "BondWithdrawn")
"""A validator's events in a pool that change the stake it has locked there (with a dispute's StakeLocked)."""
HORIZON = 256
"""Blocks back that `blockhash` reaches."""

N = TypeVar("N", int, float)


def _at(r: Row) -> AtFields:
    return {"block": r["block_number"], "time": r["block_time"], "tx_hash": r["tx_hash"]}


def percentile(values: list[N], q: float) -> N | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    return sorted(values)[nearest_rank(len(values), q) - 1]


def nearest_rank(n: int, q: float) -> int:
    """The rank (1-based) of the q-th percentile among n ordered values: ceil(n q / 100), at least 1."""
    return int(max(1, -(-n * q // 100)))


def credit_kind(credit: Row, tx_rows: list[Row]) -> CreditKind:
    """What a `Credited` was for, from the court events of its transaction (DisputeSettlement credits the
    dispute pot's shares before `DisputeResolved`; `_finalize` credits the verdict fee before `VerdictFinal` and a
    challenge's bounty after it; a stand-in's verdict credits the silent assignee's penalty)."""
    names = {r["name"]: r["log_index"] for r in tx_rows if r["contract"] == "ValidatorCourt"}
    at = credit["log_index"]
    if "VerdictGiven" in names:
        return "stand-in"
    if "DisputeResolved" in names and at < names["DisputeResolved"]:
        return "dispute share"
    if "VerdictFinal" in names:
        return "verdict fee" if at < names["VerdictFinal"] else "bounty"
    return "credit"


@dataclass(frozen=True)
class _Resolved:
    """How a dispute was resolved: overturned, void (no vote), a tie, the majority's finding."""

    overturned: bool
    work_valid: bool
    void: bool
    tie: bool


class CourtViews:
    """Mixed into `dashboard.views.Explorer` (which provides `store`, `live` and `_pool_row`)."""

    # -------------------------------------------------------------- helpers

    @property
    def court_address(self) -> str | None:
        court = self.live.court
        return court.address.lower() if court is not None else None

    def _court_params(self, pool_id: int) -> CourtParams | None:
        rows = self.store.select("SELECT data FROM events WHERE name = 'CourtConfigured' AND pool_id = ?", (pool_id,))
        return CourtParams.model_validate(rows[0]["data"]["params"]) if rows else None

    def _params_or_404(self, pool_id: int) -> CourtParams:
        self._pool_row(pool_id)
        params = self._court_params(pool_id)
        if params is None:
            raise NotFound(f"pool {pool_id} is not judged by the ValidatorCourt")
        return params

    def _amount(self, name: str, pool_id: int, party: str | None = None) -> int:
        """What the pool's events `name` (of `party`, when given) moved, as `event_counts` keeps it added up (the
        fee of a VerdictFinal, the amount of a FeesFunded or a BondAdded)."""
        where = "name = ? AND pool_id = ?" + (" AND party = ?" if party is not None else "")
        params = (name, pool_id) + ((party,) if party is not None else ())
        return sum(int(r["amount"]) for r in self.store.select(f"SELECT amount FROM event_counts WHERE {where}", params))

    def _tx_rows(self, tx_hashes: set[str]) -> dict[str, list[Row]]:
        if not tx_hashes:
            return {}
        marks = ",".join("?" * len(tx_hashes))
        out: dict[str, list[Row]] = {}
        for r in self.store.select(f"SELECT * FROM events WHERE tx_hash IN ({marks}) ORDER BY log_index",
                                   tuple(tx_hashes)):
            out.setdefault(r["tx_hash"], []).append(r)
        return out

    def _credits(self, where: str, params: tuple[object, ...]) -> list[Credit]:
        """Credited rows matching `where` (a condition on their columns), each with its `kind` (`credit_kind` over
        its transaction's court events, whose names and log indexes events_by_tx holds)."""
        rows = self.store.select(
            "SELECT block_number, block_time, tx_hash, log_index, work_id, pool_id, json_extract(data, '$.to') AS to_, "
            "json_extract(data, '$.amount') AS amount, (SELECT group_concat(t.name || ' ' || t.log_index) FROM events t "
            "WHERE t.tx_hash = events.tx_hash AND t.contract = 'ValidatorCourt') AS court_events "
            f"FROM events WHERE name = 'Credited' AND contract = 'ValidatorCourt' AND {where} "
            "ORDER BY block_number, log_index", params)
        out = []
        for r in rows:
            tx_rows = sorted(({"contract": "ValidatorCourt", "name": name, "log_index": int(at)}
                              for name, at in (e.split(" ") for e in r["court_events"].split(","))),
                             key=lambda t: t["log_index"])
            out.append(Credit(to=r["to_"], amount=r["amount"], kind=credit_kind(r, tx_rows), work_id=r["work_id"],
                              pool_id=r["pool_id"], **_at(r)))
        return out

    # -------------------------------------------------------------- a pool's court

    def court(self, pool_id: int) -> Court:
        """A court pool's rules, fee budget, cases by state, disputes, fees paid and penalties."""
        params = self._params_or_404(pool_id)
        states = {s: 0 for s in CASE_STATES} | {r["state"]: r["n"] for r in self.store.select(
            "SELECT state, SUM(n) AS n FROM work_counts WHERE pool_id = ? AND state != '' GROUP BY state", (pool_id,))}
        resolved = self.store.select("SELECT data FROM events WHERE name = 'DisputeResolved' AND pool_id = ?",
                                     (pool_id,))
        disputes = self.store.scalar("SELECT COALESCE(SUM(n), 0) FROM event_counts WHERE name = 'Disputed' AND pool_id = ?",
                                     (pool_id,))
        penalties: dict[str, int] = {}
        for r in self.store.select("SELECT data FROM events WHERE name = 'ValidatorPenalized' AND pool_id = ?",
                                   (pool_id,)):
            why = PENALTY_WHY.get(r["data"]["why"], f"why {r['data']['why']}")
            penalties[why] = penalties.get(why, 0) + int(r["data"]["amount"])
        fees, funded = (self._amount(name, pool_id) for name in ("VerdictFinal", "FeesFunded"))
        validators = self._court_validator_addresses(pool_id)
        active = sum(1 for v in validators if self._registration(pool_id, v).registered)
        exit_delay = (params.activation_delay + params.verdict_window + params.dispute_window + params.commit_period
                      + params.reveal_period)
        return Court(pool_id=pool_id, court=self.live.court.address if self.live.court else None, params=params,
                     exit_delay_s=exit_delay, fee_budget=self.live.fee_budget(pool_id), fees_funded=str(funded),
                     fees_paid=str(fees), cases=CaseCounts(**states),
                     disputes=DisputeCounts(
                         total=disputes, open=disputes - len(resolved),
                         overturned=sum(r["data"]["overturned"] for r in resolved),
                         upheld=sum(not r["data"]["overturned"] and
                                    r["data"]["votes_valid"] + r["data"]["votes_invalid"] > 0 for r in resolved),
                         void=sum(r["data"]["votes_valid"] + r["data"]["votes_invalid"] == 0 for r in resolved)),
                     validators=ValidatorCounts(registered=active, ever=len(validators)),
                     penalties={k: str(v) for k, v in penalties.items()}, penalties_total=str(sum(penalties.values())))

    def cases(self, pool_id: int, state: str | None, offset: int, limit: int) -> Page[CaseSummary]:
        self._params_or_404(pool_id)
        where, params = "pool_id = ?", [pool_id]
        if state:
            where, params = where + " AND state = ?", params + [state]
        total = self.store.scalar(f"SELECT COALESCE(SUM(n), 0) FROM work_counts WHERE {where} AND state != ''",
                                  tuple(params))
        rows = self.store.newest_works("court_cases", where + " AND state IS NOT NULL", tuple(params), offset, limit)
        return page(CaseSummary, [self._case_summary(r) for r in rows], total, offset, limit)

    def _case_summary(self, r: Row) -> CaseSummary:
        events = {e["name"]: e for e in self.store.select(
            "SELECT * FROM events WHERE work_id = ? AND name IN ('VerdictGiven', 'Disputed', 'DisputeResolved', "
            "'VerdictFinal', 'CaseVoided') ORDER BY block_number, log_index", (r["work_id"],))}
        verdict, resolved = events.get("VerdictGiven"), events.get("DisputeResolved")
        final = events.get("VerdictFinal")
        return CaseSummary(
            work_id=r["work_id"], pool_id=r["pool_id"], worker=r["data"]["worker"], state=r["state"],
            submitted=At(**_at(r)),
            judge=verdict["data"]["judge"] if verdict else None,
            first_verdict=None if not verdict else "accepted" if verdict["data"]["accepted"] else "challenged",
            reason=None if not verdict or verdict["data"]["accepted"] else self._reason(verdict),
            disputer=events["Disputed"]["data"]["disputer"] if "Disputed" in events else None,
            overturned=resolved["data"]["overturned"] if resolved else None,
            final=None if not final else "accepted" if final["data"]["accepted"] else "challenged",
            void=VOID_WHY.get(events["CaseVoided"]["data"]["why"]) if "CaseVoided" in events else None)

    @staticmethod
    def _reason(verdict_row: Row) -> str:
        return reason_name(verdict_row["data"]["reason_code"])

    # -------------------------------------------------------------- one case

    def case(self, work_id: str) -> CourtCase:
        """A court case from submission to its end: deadlines, assignment, first verdict, disputes with their
        committees (and the inputs the committee was drawn from), votes, outcome, and who paid and was paid
        what."""
        wid = work_id_of(work_id)
        rows = self.store.select("SELECT * FROM events WHERE work_id = ? ORDER BY block_number, log_index", (wid,))
        sub = next((r for r in rows if r["name"] == "WorkSubmitted"), None)
        if sub is None:
            raise NotFound(f"unknown work {work_id}")
        params = self._court_params(sub["pool_id"])
        if params is None:
            raise NotFound(f"work {work_id} is in pool {sub['pool_id']}, which the ValidatorCourt does not judge")
        state = self.store.scalar("SELECT state FROM court_cases WHERE work_id = ?", (wid,))
        by = lambda name: [r for r in rows if r["name"] == name]  # noqa: E731
        t0 = sub["block_time"]
        txs = self._tx_rows({r["tx_hash"] for r in rows})

        drawn = by("AssignmentDrawn")
        assignee = drawn[0]["data"]["validator"] if drawn else self.live.assigned(wid)
        if assignee and assignee.lower() == ZERO_ADDRESS:
            assignee = None
        silence = [r for r in by("ValidatorPenalized") if r["data"]["why"] == 4]
        out = CourtCase(
            work_id=wid, pool_id=sub["pool_id"], worker=sub["data"]["worker"], state=state,
            n_samples=sub["data"]["n_samples"], step=sub["data"]["step"], submitted=At(**_at(sub)),
            now=self.live.now(), params=params,
            assignment=Assignment(
                validator=assignee, recorded=At(**_at(drawn[0])) if drawn else None,
                seed_block=sub["block_number"] + 1, seed_block_hash=self.live.block_hash(sub["block_number"] + 1),
                set_at_time=t0 - params.activation_delay,
                rule="keccak256(abi.encode(hash of the seed block, work id)) mod the size of the active set at "
                     "set_at_time (drawn again if it lands on the worker's own entry)"),
            deadlines=Deadlines(assigned_until=t0 + params.assigned_window, verdict_until=t0 + params.verdict_window),
            first_verdict=None, disputes=[], outcome=None, payments=[], penalties=[],
            worker_slashed=None, pool_verdict=None, paid=None,
        )
        verdicts = by("VerdictGiven")
        if verdicts:
            v = verdicts[0]
            d = v["data"]
            out.first_verdict = FirstVerdict(
                judge=d["judge"], accepted=d["accepted"], **_at(v),
                reason=None if d["accepted"] else reason_name(d["reason_code"]),
                reason_code=None if d["accepted"] else d["reason_code"],
                evidence_digest=None if d["accepted"] else d["evidence_digest"],
                stand_in=bool(assignee) and d["judge"].lower() != assignee.lower(),
                silent_assignee_penalty=str(sum(int(r["data"]["amount"]) for r in silence
                                                if r["tx_hash"] == v["tx_hash"])))
            out.deadlines.dispute_until = v["block_time"] + params.dispute_window
        for dsp in by("Disputed"):
            out.disputes.append(self._dispute(wid, sub, dsp, rows, params))
            dt = max([dsp["block_time"]] + [r["block_time"] for r in by("DisputeReopened")])  # the current round's
            out.deadlines.committee_draw_until = dt + params.commit_period // 2
            out.deadlines.commit_until = dt + params.commit_period
            out.deadlines.reveal_until = dt + params.commit_period + params.reveal_period
        final, void = by("VerdictFinal"), by("CaseVoided")
        if final:
            f = final[0]["data"]
            out.outcome = FinalOutcome(final="accepted" if f["accepted"] else "challenged", owner=f["judge"],
                                       fee=f["fee"], **_at(final[0]))
        elif void:
            out.outcome = VoidOutcome(final="void", why=VOID_WHY.get(void[0]["data"]["why"]), **_at(void[0]))
        for r in by("ValidatorPenalized"):
            out.penalties.append(Penalty(party=r["data"]["party"], why=PENALTY_WHY.get(r["data"]["why"]),
                                         why_code=r["data"]["why"], amount=r["data"]["amount"], **_at(r)))
        for r in by("Credited"):
            out.payments.append(Payment(to=r["data"]["to"], amount=r["data"]["amount"],
                                        kind=credit_kind(r, txs[r["tx_hash"]]), **_at(r)))
        pool_verdict = by("WorkAccepted") + by("WorkChallenged") + by("WorkExpired")
        if pool_verdict:
            p = pool_verdict[0]
            out.pool_verdict = PoolVerdictEvent(event=p["name"], **_at(p),
                                                reason=reason_name(p["data"]["reason_code"])
                                                if p["name"] == "WorkChallenged" else None)
            slash = self._worker_slash(p["tx_hash"], sub["worker"])
            if slash:
                out.worker_slashed = slash
        paid = self.store.select("SELECT e.* FROM claimed_works c CROSS JOIN events e ON e.tx_hash = c.tx_hash "
                                 "AND +e.name = 'RewardsClaimed' WHERE c.work_id = ?", (wid,))
        if paid:
            out.paid = At(**_at(paid[0]))
        return out

    def _worker_slash(self, tx_hash: str, worker: str) -> WorkerSlash | None:
        """The worker's slash in the transaction that recorded a challenge in the pool (not a validator's)."""
        pool = self.live.pool.address.lower()
        for r in self.store.select("SELECT * FROM events WHERE tx_hash = ? AND name = 'Slashed' AND worker = ?",
                                   (tx_hash, worker)):
            if r["data"]["slasher"].lower() == pool:
                return WorkerSlash(amount=r["data"]["amount"], bounty=r["data"]["bounty"],
                                   challenger=r["data"]["challenger"], **_at(r))
        return None

    def _dispute(self, wid: str, sub: Row, dsp: Row, rows: list[Row],
                 params: CourtParams) -> Dispute:
        after = [r for r in rows if (r["block_number"], r["log_index"]) > (dsp["block_number"], dsp["log_index"])]
        committees = []
        anchor, round_ = dsp, 0  # a committee is drawn from the block after the dispute, or after its reopening
        for r in after:
            if r["name"] == "DisputeReopened":
                anchor, round_ = r, r["data"].get("round", round_ + 1)
                continue
            if r["name"] != "CommitteeDrawn":
                continue
            seed_block: int | None = anchor["block_number"] + 1
            seed_hash = self.live.block_hash(anchor["block_number"] + 1)
            if r["block_number"] - (anchor["block_number"] + 1) > HORIZON:
                # past blockhash's reach the court re-anchors to a later block in a draw call that emits nothing
                seed_block = seed_hash = None
            seed = None if seed_hash is None else "0x" + keccak(
                bytes.fromhex(seed_hash[2:]) + bytes.fromhex(wid[2:]) + round_.to_bytes(32, "big")).hex()
            committees.append(Committee(
                members=r["data"]["committee"], round=round_, **_at(r),
                seed_inputs=SeedInputs(dispute_block=anchor["block_number"], seed_block=seed_block,
                                       seed_block_hash=seed_hash, round=round_, seed=seed,
                                       rule="keccak256(abi.encode(hash of the seed block, work id, round))",
                                       set_at_time=sub["block_time"] - params.activation_delay,
                                       size=params.committee_size,
                                       excluded="the judge, the disputer and the worker's own validator entry; "
                                                "members need non_voter_penalty of free locked stake")))
        members = {m.lower() for c in committees for m in c.members}
        resolved = next((r for r in after if r["name"] == "DisputeResolved"), None)
        votes = []
        for m in [m for c in committees for m in c.members]:
            mine = lambda name: next((r for r in after if r["name"] == name and r["party"] == m.lower()), None)  # noqa: E731,B023
            committed, revealed = mine("VoteCommitted"), mine("VoteRevealed")
            vote = revealed["data"]["work_valid"] if revealed else None
            penalty = next((r for r in after if r["name"] == "ValidatorPenalized" and r["party"] == m.lower()
                            and r["data"]["why"] in (3, 5)), None)
            votes.append(Vote(voter=m, committed=At(**_at(committed)) if committed else None,
                              revealed=At(**_at(revealed)) if revealed else None,
                              vote=None if vote is None else "valid" if vote else "invalid",
                              with_majority=None if resolved is None or vote is None
                              or resolved["data"]["votes_valid"] == resolved["data"]["votes_invalid"]
                              else vote == resolved["data"]["work_valid"],
                              penalty=penalty["data"]["amount"] if penalty else None))
        return Dispute(
            disputer=dsp["data"]["disputer"], evidence_digest=dsp["data"]["evidence_digest"], **_at(dsp),
            committees=committees, votes=votes, seats=len(members),
            resolved=None if resolved is None else Resolution(
                work_valid=resolved["data"]["work_valid"], overturned=resolved["data"]["overturned"],
                votes_valid=resolved["data"]["votes_valid"], votes_invalid=resolved["data"]["votes_invalid"],
                **_at(resolved)),
            reopened=[Reopened(**_at(r), round=r["data"].get("round")) for r in after if r["name"] == "DisputeReopened"])

    # -------------------------------------------------------------- validators

    def _court_validator_addresses(self, pool_id: int) -> list[str]:
        return [r["party"] for r in self.store.select(
            "SELECT party, MIN(block_number) AS b FROM events WHERE name = 'ValidatorRegistered' AND pool_id = ? "
            "GROUP BY party ORDER BY b", (pool_id,))]

    def _registration(self, pool_id: int, v: str) -> Registration:
        rows = self.store.select("SELECT * FROM events WHERE pool_id = ? AND party = ? AND name IN "
                                 "('ValidatorRegistered', 'ValidatorDeregistered', 'BondWithdrawn') "
                                 "ORDER BY block_number, log_index", (pool_id, v))
        out = Registration(registered=False, index=None, registered_at=None, deregistered_at=None, exit_at=None,
                           bond_withdrawn=None)
        for r in rows:
            if r["name"] == "ValidatorRegistered":
                out = Registration(registered=True, index=r["data"]["index"], registered_at=At(**_at(r)),
                                   deregistered_at=None, exit_at=None, bond_withdrawn=None)
            elif r["name"] == "ValidatorDeregistered":
                out.registered, out.deregistered_at, out.exit_at = False, At(**_at(r)), r["data"]["exit_at"]
            else:
                out.bond_withdrawn = BondWithdrawn(amount=r["data"]["amount"], **_at(r))
        return out

    def validator_in_pool(self, pool_id: int, address: str) -> ValidatorInPool:
        """One validator in one court pool: registration, bond (locked, reserved, free: live, and locked as the
        events add up), verdicts, how they ended, disputes, committee seats and votes, penalties and earnings."""
        v = address.lower()
        def named(*names: str) -> list[Row]:  # the validator's events of `names` in the pool, in chain order
            return self.store.select(f"SELECT * FROM events WHERE party = ? AND name IN ({', '.join('?' * len(names))}) "
                                     "AND pool_id = ? ORDER BY block_number, log_index", (v, *names, pool_id))
        # its verdicts by outcome as judge_counts keeps them (a work has one first verdict), and the few resolved
        given = self.store.select(
            "SELECT COALESCE(SUM(n), 0) AS given, COALESCE(SUM(n * accepted), 0) AS accepted, "
            "COALESCE(SUM(n * ended), 0) AS final, COALESCE(SUM(n * (disputed AND NOT resolved)), 0) AS disputed_open "
            "FROM judge_counts WHERE pool_id = ? AND judge = ?", (pool_id, v))[0]
        resolved = self._resolved_rows(self.store.select(
            "SELECT r.* FROM works w CROSS JOIN events r ON r.work_id = w.work_id AND r.name = 'DisputeResolved' "
            "WHERE w.judge = ? AND w.pool_id = ? AND w.resolved = 1", (v, pool_id)))
        disputes = named("Disputed")
        dispute_outcome = self._resolved([r["work_id"] for r in disputes])
        seats = self.store.select(
            "SELECT * FROM events WHERE name = 'CommitteeDrawn' AND pool_id = ? AND EXISTS (SELECT 1 FROM "
            "json_each(events.data, '$.committee') j WHERE lower(j.value) = ?)", (pool_id, v))
        seat_outcome = self._resolved([r["work_id"] for r in seats])
        revealed = {r["work_id"]: r["data"]["work_valid"] for r in named("VoteRevealed")}
        committed = {r["work_id"] for r in named("VoteCommitted")}
        penalties = named("ValidatorPenalized")
        by_why: dict[str, int] = {}
        for r in penalties:
            why = PENALTY_WHY.get(r["data"]["why"], str(r["data"]["why"]))
            by_why[why] = by_why.get(why, 0) + int(r["data"]["amount"])
        credits = self._credits("pool_id = ? AND party = ?", (pool_id, v))
        by_kind: dict[str, int] = {}
        for c in credits:
            by_kind[c.kind] = by_kind.get(c.kind, 0) + int(c.amount)
        locked = self._locked_from_events(pool_id, v, named(*LOCK_EVENTS))
        bond_added = self._amount("BondAdded", pool_id, v)
        majority = [w for w, valid in revealed.items() if w in seat_outcome and not seat_outcome[w].tie
                    and valid == seat_outcome[w].work_valid]
        reg = self._registration(pool_id, v)
        return ValidatorInPool(
            pool_id=pool_id, validator=address, registered=reg.registered, index=reg.index,
            registered_at=reg.registered_at, deregistered_at=reg.deregistered_at, exit_at=reg.exit_at,
            bond_withdrawn=reg.bond_withdrawn,
            live=self.live.court_validator(pool_id, v),
            locked_from_events=str(locked["locked"]), dispute_bonds_locked=str(locked["dispute_locks"]),
            bond_added=str(bond_added),
            reserved_by_open_cases=self._reserved(pool_id, v, self._court_params(pool_id)),
            verdicts=VerdictCounts(
                given=given["given"], accepted=given["accepted"], challenged=given["given"] - given["accepted"],
                final=given["final"], disputed=len(resolved) + given["disputed_open"],
                overturned=sum(o.overturned for o in resolved.values()),
                upheld=sum(not o.overturned and not o.void for o in resolved.values())),
            disputes=DisputesFiled(
                filed=len(disputes), won=sum(o.overturned for o in dispute_outcome.values()),
                lost=sum(not o.overturned and not o.void for o in dispute_outcome.values()),
                void=sum(o.void for o in dispute_outcome.values()), open=len(disputes) - len(dispute_outcome)),
            committee=CommitteeCounts(
                seats=len(seats), committed=len(committed), revealed=len(revealed),
                missed=sum(1 for r in seats if r["work_id"] in seat_outcome and r["work_id"] not in revealed),
                with_majority=len(majority),
                with_minority=sum(1 for w, valid in revealed.items() if w in seat_outcome
                                  and not seat_outcome[w].tie and valid != seat_outcome[w].work_valid)),
            penalties={k: str(x) for k, x in by_why.items()}, penalties_total=str(sum(by_why.values())),
            earned={k: str(x) for k, x in by_kind.items()}, earned_total=str(sum(by_kind.values())),
        )

    def _resolved(self, work_ids: list[str]) -> dict[str, _Resolved]:
        """work id → how its dispute was resolved."""
        if not work_ids:
            return {}
        marks = ",".join("?" * len(work_ids))
        return self._resolved_rows(self.store.select(
            f"SELECT * FROM events WHERE name = 'DisputeResolved' AND work_id IN ({marks})", tuple(work_ids)))

    @staticmethod
    def _resolved_rows(rows: list[Row]) -> dict[str, _Resolved]:
        """work id → how its dispute was resolved, from `DisputeResolved` rows."""
        out = {}
        for r in rows:
            d = r["data"]
            out[r["work_id"]] = _Resolved(overturned=d["overturned"], work_valid=d["work_valid"],
                                          void=d["votes_valid"] + d["votes_invalid"] == 0,
                                          tie=d["votes_valid"] == d["votes_invalid"])
        return out

    def _locked_from_events(self, pool_id: int, v: str, rows: list[Row]) -> dict[str, int]:
        """The validator's stake locked in this pool as its events add up (`rows`: its LOCK_EVENTS in the pool): the
        registration's bond, bonds added, what a dispute locked (the StakeManager's lock in the dispute's
        transaction), less penalties and the bond withdrawn."""
        court = self.court_address
        locks = [r for r in self.store.select(
            "SELECT * FROM events WHERE name = 'StakeLocked' AND worker = ? AND tx_hash IN (SELECT tx_hash FROM events "
            "WHERE name = 'Disputed' AND pool_id = ? AND party = ?)", (v, pool_id, v))
            if r["data"]["slasher"].lower() == court]
        locked = dispute_locks = 0
        for r in sorted(rows + locks, key=lambda r: (r["block_number"], r["log_index"])):
            d = r["data"]
            if r["name"] == "ValidatorRegistered":
                locked = int(d["bond"])
            elif r["name"] == "BondAdded":
                locked = int(d["locked"])
            elif r["name"] == "StakeLocked":
                locked += int(d["amount"])
                dispute_locks += int(d["amount"])
            elif r["name"] in ("ValidatorPenalized", "BondWithdrawn"):
                locked -= int(d["amount"])
        return {"locked": locked, "dispute_locks": dispute_locks}

    def _reserved(self, pool_id: int, v: str, params: CourtParams | None) -> Reserved:
        """What the validator's open cases reserve of its locked stake: each open verdict the wrong-verdict
        slash, each open dispute its bond, each seat on an open committee the non-voter penalty (a pool the
        court does not judge has no cases)."""
        if params is None:
            return Reserved(total="0", cases=[])
        # the open cases' verdicts, disputes and committees (works_by_pool_state, then each work's events)
        items = []
        for r in self.store.select(
                "SELECT e.* FROM works w CROSS JOIN events e ON e.work_id = w.work_id AND e.name IN ('VerdictGiven', "
                "'Disputed', 'CommitteeDrawn') WHERE w.pool_id = ? AND w.state IN ('verdict', 'disputed') "
                "AND e.pool_id = ? ORDER BY e.block_number, e.log_index", (pool_id, pool_id)):
            if r["name"] == "VerdictGiven" and r["party"] == v:
                items.append(ReservedCase(work_id=r["work_id"], as_="judge", amount=params.wrong_verdict_slash))
            elif r["name"] == "Disputed" and r["party"] == v:
                items.append(ReservedCase(work_id=r["work_id"], as_="disputer", amount=params.dispute_bond))
            elif r["name"] == "CommitteeDrawn" and v in (m.lower() for m in r["data"]["committee"]):
                items.append(ReservedCase(work_id=r["work_id"], as_="committee member",
                                          amount=params.non_voter_penalty))
        return Reserved(total=str(sum(int(i.amount) for i in items)), cases=items)

    def court_validators(self, pool_id: int, offset: int, limit: int) -> Page[CourtValidator]:
        self._params_or_404(pool_id)
        addresses = self._court_validator_addresses(pool_id)
        items = []
        for v in addresses[offset:offset + limit]:
            s = self.validator_in_pool(pool_id, self._checksum(v))
            items.append(CourtValidator(validator=s.validator, registered=s.registered, index=s.index, live=s.live,
                                        verdicts=s.verdicts, disputes=s.disputes, committee=s.committee,
                                        penalties_total=s.penalties_total, earned_total=s.earned_total,
                                        exit_at=s.exit_at))
        return page(CourtValidator, items, len(addresses), offset, limit)

    @staticmethod
    def _checksum(address: str) -> str:
        return Web3.to_checksum_address(address)

    def _known_validator(self, address: str) -> str:
        """The validator's address as the index keeps it; NotFound if it never registered with the court."""
        v = address_of(address)
        if not self.store.scalar("SELECT 1 FROM events WHERE party = ? AND name = 'ValidatorRegistered' LIMIT 1", (v,)):
            raise NotFound(f"unknown validator {address} (never registered with the court)")
        return v

    def validator(self, address: str) -> Validator:
        """A validator across the pools it registered in, with its court-wide credits and withdrawals."""
        v = self._known_validator(address)
        pools = [r["pool_id"] for r in self.store.select(
            "SELECT DISTINCT pool_id FROM events WHERE name = 'ValidatorRegistered' AND party = ? ORDER BY pool_id",
            (v,))]
        per_pool = [self.validator_in_pool(p, self._checksum(v)) for p in pools]
        withdrawn = self.store.select("SELECT * FROM events WHERE name = 'Withdrawn' AND contract = 'ValidatorCourt' "
                                      "AND party = ? ORDER BY block_number, log_index", (v,))
        return Validator(validator=self._checksum(v), pools=per_pool, account=self.live.court_account(v),
                         withdrawn=[Withdrawal(amount=r["data"]["amount"], **_at(r)) for r in withdrawn],
                         withdrawn_total=str(sum(int(r["data"]["amount"]) for r in withdrawn)),
                         earned_total=str(sum(int(p.earned_total) for p in per_pool)),
                         penalties_total=str(sum(int(p.penalties_total) for p in per_pool)))

    def validator_verdicts(self, address: str, offset: int, limit: int) -> Page[ValidatorVerdict]:
        """The validator's first verdicts, newest first, each with how its case ended and what it earned or lost."""
        v = self._known_validator(address)
        where = "FROM events WHERE name = 'VerdictGiven' AND party = ?"
        total = self.store.scalar("SELECT COALESCE(SUM(n), 0) FROM event_counts WHERE name = 'VerdictGiven' "
                                  "AND party = ?", (v,))
        total, rows = self.store.newest_first(where, (v,), offset, limit, total)
        items = []
        for r in rows:
            d = r["data"]
            case = self._case_summary(self.store.select("SELECT * FROM court_cases WHERE work_id = ?",
                                                        (r["work_id"],))[0])
            earned = sum(int(c.amount) for c in self._credits("work_id = ? AND party = ?", (r["work_id"], v)))
            lost = sum(int(p["data"]["amount"]) for p in self.store.select(
                "SELECT data FROM events WHERE name = 'ValidatorPenalized' AND work_id = ? AND party = ?",
                (r["work_id"], v)))
            items.append(ValidatorVerdict(work_id=r["work_id"], pool_id=r["pool_id"], **_at(r),
                                          verdict="accepted" if d["accepted"] else "challenged",
                                          reason=None if d["accepted"] else reason_name(d["reason_code"]),
                                          state=case.state, disputer=case.disputer, overturned=case.overturned,
                                          earned=str(earned), lost=str(lost)))
        return page(ValidatorVerdict, items, total, offset, limit)

    def validator_earnings(self, address: str) -> ValidatorEarnings:
        """Every credit and penalty of the validator in time order, with running totals (earnings over time)."""
        v = self._known_validator(address)
        changes: list[Credit | Penalized] = [*self._credits("party = ?", (v,))]
        for r in self.store.select("SELECT * FROM events WHERE name = 'ValidatorPenalized' AND party = ?", (v,)):
            changes.append(Penalized(to=r["data"]["party"], amount=r["data"]["amount"],
                                     what=PENALTY_WHY.get(r["data"]["why"]), work_id=r["work_id"],
                                     pool_id=r["pool_id"], **_at(r)))
        changes.sort(key=lambda c: (c.block, c.tx_hash))
        earned = lost = 0
        points = []
        for c in changes:
            if isinstance(c, Credit):
                earned += int(c.amount)
                points.append(EarningPoint(to=c.to, amount=c.amount, kind=c.kind, work_id=c.work_id,
                                           pool_id=c.pool_id, block=c.block, time=c.time, tx_hash=c.tx_hash,
                                           change=c.amount, what=c.kind, earned=str(earned), lost=str(lost),
                                           net=str(earned - lost)))
            else:
                lost += int(c.amount)
                points.append(EarningPoint(to=c.to, amount=c.amount, kind="penalty", work_id=c.work_id,
                                           pool_id=c.pool_id, block=c.block, time=c.time, tx_hash=c.tx_hash,
                                           change="-" + c.amount, what=c.what,
                                           earned=str(earned), lost=str(lost), net=str(earned - lost)))
        return ValidatorEarnings(validator=self._checksum(v), points=points, earned=str(earned), lost=str(lost),
                                 net=str(earned - lost))


@dataclass(frozen=True)
class Penalized:
    """A `ValidatorPenalized` of the validator, as its earnings list it."""

    to: str
    amount: str
    what: str | None
    work_id: str | None
    pool_id: int | None
    block: int
    time: int
    tx_hash: str
