"""Is honest play each party's best response in a court pool, as the contracts settle it today? `python -m bench.economics`.

An agent-based Monte Carlo of files through the ValidatorCourt (docs/protocol.md §9; issue 43's simulation), at a
pool's parameters (`--pool`, default examples/pool-court.toml) and a per-check cost. Each cell of the grid is a
worker cheating rate r (`--cheat-rate`) and a cartel fraction f (`--cartel`); in a cell, ⌊f·V⌋ of the V
validators are the cartel and the rest honest, and the deviations below are measured against it with the same
random draws (common random numbers: the paired difference has a far smaller interval than either payoff).

The model, file by file (every assumption is here; docs/notes/economics.md argues them):

- *Workers.* A share `--cheater-share` of the pool's files come from cheating workers, who fabricate each file with
  probability r (saving the generation cost g: a fabricated file costs nothing) and are the cartel's allies; the
  rest come from honest workers (every file valid, cost g), whom the cartel may attack. Workers are not validators.
  A file final accepted pays its worker R = rewardPerSample × maxSamplesPerWork; final rejected costs it S (and
  pays nothing); a void case neither (the work expires).
- *Spot checks.* A fabricated file (one fabricated completion: the cheater's best case, R8.4) is detectable with
  the hypergeometric probability m/n of the pool's q; the draw is the same for every checker (R8.2), so a file the
  judge's check missed is missed by every auditor and voter too. Honest files are never challenged by a check (no
  false positives).
- *Assignment.* A uniformly drawn validator (R9.5). A silent assignee's case goes to a stand-in drawn uniformly
  among the validators that answer; the stand-in takes `silencePenalty` from it (R9.6); with none, the case lapses
  (R9.7). Every validator has stake enough for every reservation (no saturation, no capped penalty).
- *Validators.* **honest**: checks its assignments (cost c), audits each other verdict with probability
  `--audit-rate` (an independent draw no one can predict: validator.court.audits), disputes a verdict its check
  contradicts, votes by its check (checking the file if it has not yet); each validator checks a file at most once
  (decision 0008). **lazy**: attests without checking, never audits, votes a coin flip. **silent**: never answers
  (loses `silencePenalty` per assignment, `nonVoterPenalty` per seat). **cartel** (malicious, a fraction f, allied
  with the cheating workers; it knows which files are its allies' and that the others are valid but for their
  forced errors, so it never checks an ally's file): attests its allies' files; as the judge of an outsider's file it
  does what pays the coalition most — checks it (and judges it as an honest validator would), attests it unchecked,
  or falsely challenges it; it disputes a correct acceptance of an outsider's file, and a correct rejection of an
  ally's fabricated file, only when that beats not doing it (the coalition's expected payoff: cartel validators and
  allied workers together, computed from the court's amounts, the check cost, ρ and J, the audit rate and the
  committee's hypergeometric draw — it cannot predict audits); on a committee it votes for the cartel's side, and
  when the case is none of its business for the truth (checking the file if it checks outsiders' files, otherwise
  voting it valid).
- *Disputes.* The first auditor to contradict a verdict disputes it (at most one dispute); the committee is k
  validators drawn uniformly among those that are not parties (R9.10); a round with no revealed vote is reopened
  with a new committee, up to 3 rounds, then void (R9.12). Settlement follows contracts/src/DisputeSettlement.sol:
  overturned, the judge loses `wrongVerdictSlash`; upheld with votes, the disputer loses `disputeBond`; every
  silent or (no tie) minority seat loses `nonVoterPenalty`; each majority voter is paid ⌊nonVoterPenalty/2⌋ (at most
  the pot over the majority) and the winning party takes the rest; a tie's pot goes to the fee budget. The final
  verdict's owner (the judge, or the disputer if overturned) is paid `verdictFee` and, for a rejection, the bounty
  b·S (R9.16).

- *Forced errors* (contracts/src/ForcedErrors.sol, R9.25–R9.29; `--forced-bps` ρ, `--jackpot` J; `--forced-bps 0`: the
  court alone). Each file owes a forced error with probability ρ whoever its worker is (its own chain decides); every
  check flags it; the worker generated it (cost g). A cartel knows its allies' forced errors (they tell it) and
  challenges them unchecked; an outsider's it catches only by checking the file. After the case is final, as `settle` pays: the party that
  said valid loses `wrongVerdictSlash`, the one that said invalid takes J; the owed file is paid as an honest one
  (R9.28 (7)): rejected, the worker is refunded S and paid R; accepted (the pool paid R), it loses S; accepted
  undisputed, every drawn auditor that did not check (lazy, cartel, skipping audits; a silent one withheld its link,
  so it is drawn for every file) loses `wrongVerdictSlash` (`chargeAuditor`).
  **skipping audits** (a deviation): checks and judges its assignments as an honest validator, never audits.

Payoffs are in tokens: a validator's per file it is assigned (its total over the run × V / files: the assignments
are uniform), a worker's per file it submits. Rows per cell: the honest validators' mean, a cartel member's, one
honest validator turned lazy and one turned silent (each with its gain over staying honest: the paired difference),
and at f = 0 one validator turned malicious (a cartel of one); the honest and the cheating worker. Validator payoffs
and gains are post-stratified on (forced, drawn to the deviator) with their exact probabilities (ρ, 1/V): a rare
jackpot would otherwise swamp the interval.
`honest_check_best_response`: in every cell with f ≤ 1/3, the lazy deviation's mean gain is ≤ 0.
`cheating_unprofitable`: in every cell with r > 0, the cheating worker's mean payoff is below the honest worker's.
`honest_audit_best_response`, `silence_unprofitable`: the same test for the validator that skips audits and the silent
one. `verification_per_file`: the verification budget's net outlay per file (jackpots and refunds less the penalties
it takes), the largest over the cells.
`break_even`: in the cells at r → 0 (r ≤ 0.001), f ≤ 1/3, what a mechanism must pay an honest validator per check,
in expectation (audit pay, or a forced-error jackpot J at rate ε with ε·J at least this), for the lazy deviation
to stop gaining: the lazy gain over the honest validator's checks (the largest over those cells).
Last line: one JSON object (bench/report.py); `--record` keeps it as bench/results/economics.json.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from itertools import product
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit
from cli.errors import EXIT_USAGE, UsageError, describe_error
from deploy.pools import PoolConfig, vote_pay
from deploy.terms import read_pool_toml
from protocol.runspec import RunSpecFileError, load_run_spec
from protocol.spotcheck import MAX_BPS, detection_probability, spot_check_count

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_POOL = ROOT / "examples" / "pool-court.toml"
DEFAULT_RUN_SPEC = ROOT / "examples" / "run.toml"
"""Where maxSamplesPerWork and spotCheckBps come from when the pool TOML leaves them to the run spec (as
`pool create` takes them): examples/pool-court.toml's `task = "@init"` is `trainer init --run-spec examples/run.toml`."""
TOKEN = 10**18
GENERATION_SHARE = 0.5
"""Default generation cost g, as a share of the file's reward R: a worker keeps half its reward (an assumption: a
pool that paid less than g would have no honest workers, one that paid far more would attract competition)."""
CHECK_PER_GENERATION = 1 / 7.07
"""Default check cost at q = 1, as a share of g: verifying a file is 7.07× faster than generating it
(bench/results/toploc-quick.json, `verify_speedup`); the expensive part scales with q, so c = g·q / 7.07."""
DISPUTE_ROUNDS = 3
"""ValidatorCourt.DISPUTE_ROUNDS."""
Z95 = 1.959963984540054
HONEST, LAZY, SILENT, CARTEL, AUDITLESS = "honest", "lazy", "silent", "cartel", "auditless"
DEFAULT_FORCED_BPS = 200
"""ρ = 2 % (docs/notes/economics.md argues it): the shipped forced-error rate, `--forced-bps`."""
DEFAULT_JACKPOT = 1_000.0
"""J = 1,000 tokens (≈ 7.8 R; ρ·J = 20 ≥ the 17.4 a validator's checks cost per assigned file): `--jackpot`."""
DEFAULT_RATES = (0.0, 0.001, 0.1)
DEFAULT_CARTELS = (0.0, 0.1, 0.2, 1 / 3)
NEAR_ZERO = 0.001
"""Cheating rates at or below this are the "r → 0" cells of the break-even."""


class Usage(Exception):
    """A bad flag or input: one `error:` line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own: usage and message on several lines
        raise Usage(message)


# ---- the court's amounts ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Court:
    """A court pool's amounts, in tokens (docs/protocol.md §1, §9)."""

    reward: float
    """R: a full file's reward (rewardPerSample × maxSamplesPerWork)."""
    slash: float
    """S."""
    bounty: float
    """b·S, as ComputePool.challenge computes it."""
    fee: float
    wrong_verdict_slash: float
    dispute_bond: float
    non_voter_penalty: float
    vote_pay: float
    """⌊nonVoterPenalty / 2⌋ (DisputeSettlement.votePay)."""
    silence_penalty: float
    committee_size: int
    samples_per_work: int
    spot_check_bps: int
    detect: float
    """The probability that the spot check includes one fabricated completion: m/n (R8.4)."""


def court_of(cfg: PoolConfig, samples_per_work: int, spot_check_bps: int) -> Court:
    c = cfg.court
    assert c is not None
    m = spot_check_count(samples_per_work, spot_check_bps)
    return Court(reward=cfg.reward_per_sample * samples_per_work / TOKEN, slash=cfg.slash_amount / TOKEN,
                 bounty=cfg.slash_amount * cfg.bounty_bps // MAX_BPS / TOKEN, fee=c.verdict_fee / TOKEN,
                 wrong_verdict_slash=c.wrong_verdict_slash / TOKEN, dispute_bond=c.dispute_bond / TOKEN,
                 non_voter_penalty=c.non_voter_penalty / TOKEN, vote_pay=vote_pay(c.non_voter_penalty) / TOKEN,
                 silence_penalty=c.silence_penalty / TOKEN, committee_size=c.committee_size,
                 samples_per_work=samples_per_work, spot_check_bps=spot_check_bps,
                 detect=detection_probability(samples_per_work, m, 1))


def load_court(pool: Path, run_spec: Path) -> Court:
    """The court of the pool TOML `pool`; maxSamplesPerWork and spotCheckBps from `run_spec` where it leaves them."""
    try:
        doc = read_pool_toml(pool)
    except UsageError as exc:
        raise Usage(str(exc)) from None
    if not isinstance(doc["pool"], dict):
        raise Usage(f"pool config {pool} has no [pool] table")
    try:
        cfg = PoolConfig.model_validate(doc["pool"])
    except ValidationError as exc:
        raise Usage(f"pool config {pool}: {describe_error(exc)}") from None
    if cfg.court is None:
        raise Usage(f"pool config {pool} has no [pool.court] table: this simulates a pool judged by the court")
    spec = None
    if cfg.max_samples_per_work is None or cfg.spot_check_bps is None:
        try:
            spec = load_run_spec(run_spec)
        except (RunSpecFileError, ValidationError) as exc:
            raise Usage(f"run spec {run_spec}: {describe_error(exc)}") from None
    return court_of(cfg, cfg.samples_per_work(spec), cfg.spot_check(spec))


@dataclass(frozen=True)
class Model:
    court: Court
    validators: int
    audit_rate: float
    check_cost: float
    generation_cost: float
    cheater_share: float
    forced_rate: float = 0.0
    """ρ: the share of every worker's files that owe a forced error (ForcedErrors `forcedBps` / 10000; 0: none)."""
    jackpot: float = 0.0
    """J: what the validator that judged a forced error invalid takes from the verification budget."""


# ---- settlement (contracts/src/DisputeSettlement.sol `settle`, ValidatorCourt `_finalize`) ----------------------------


@dataclass
class Settlement:
    decided: bool
    """False: no vote was revealed (the dispute is reopened, or after the last round the case is void)."""
    work_valid: bool
    overturned: bool
    winner: object
    pays: dict
    """Who → what the settlement moves (penalties negative), before the final verdict's fee and bounty."""


def settle(court: Court, accepted: bool, judge: object, disputer: object,
           committee: list[tuple[object, bool | None]]) -> Settlement:
    """A resolved dispute as DisputeSettlement.settle pays it; `committee` is (member, revealed vote or None)."""
    yes = sum(vote is True for _, vote in committee)
    no = sum(vote is False for _, vote in committee)
    pays: dict = defaultdict(float)
    if yes + no == 0:  # nobody revealed: only the committee pays, to the fee budget
        for member, _ in committee:
            pays[member] -= court.non_voter_penalty
        return Settlement(False, accepted, False, None, pays)
    work_valid = True if yes > no else False if no > yes else accepted
    overturned = work_valid != accepted
    if overturned:
        pot = court.wrong_verdict_slash
        pays[judge] -= pot
    else:
        pot = court.dispute_bond
        pays[disputer] -= pot
    tie = yes == no
    for member, vote in committee:
        if vote is None or (not tie and vote != work_valid):
            pays[member] -= court.non_voter_penalty
            pot += court.non_voter_penalty
    winner = disputer if overturned else judge
    if tie:  # the pot goes to the pool's fee budget
        return Settlement(True, work_valid, overturned, winner, pays)
    majority = yes if work_valid else no
    pay = min(court.vote_pay, pot / majority)
    for member, vote in committee:
        if vote == work_valid:
            pays[member] += pay
    pays[winner] += pot - pay * majority
    return Settlement(True, work_valid, overturned, winner, pays)


def final_pay(court: Court, accepted: bool) -> float:
    """What the final verdict's owner is paid: the fee, and the bounty b·S for a rejection."""
    return court.fee + (0.0 if accepted else court.bounty)


# ---- the cartel's expectations ---------------------------------------------------------------------------------------


def _hypergeometric(groups: dict[str, int], seats: int):
    """(seats of each group, probability) for a uniform draw of min(seats, total) of the members of `groups`."""
    names = list(groups)
    total = sum(groups.values())
    seats = min(seats, total)
    if seats == 0:
        yield dict.fromkeys(names, 0), 1.0
        return
    whole = math.comb(total, seats)
    for counts in product(*(range(min(groups[n], seats) + 1) for n in names)):
        if sum(counts) == seats:
            yield dict(zip(names, counts, strict=True)), math.prod(
                math.comb(groups[n], c) for n, c in zip(names, counts, strict=True)) / whole


def dispute_value(court: Court, eligible: dict[str, int], *, accepted: bool, detectable: bool, cartel_side: bool,
                  judge_cartel: bool, disputer_cartel: bool, ally: bool) -> float:
    """The coalition's expected payoff (cartel validators, and the file's worker if an ally) from a dispute of a
    verdict `accepted`, decided by one committee of the `eligible` validators (counts by strategy). A dispute that
    no vote decides counts as void (the parties freed)."""
    value = 0.0
    for seats, p in _hypergeometric(eligible, court.committee_size):
        lazy = seats.get(LAZY, 0)
        for yes_lazy in range(lazy + 1):
            q = p * math.comb(lazy, yes_lazy) / 2**lazy
            committee: list[tuple[object, bool | None]] = []
            committee += [(("c", i), cartel_side) for i in range(seats.get(CARTEL, 0))]
            committee += [(("h", i), not detectable) for i in range(seats.get(HONEST, 0))]
            committee += [(("l", i), i < yes_lazy) for i in range(lazy)]
            committee += [(("s", i), None) for i in range(seats.get(SILENT, 0))]
            s = settle(court, accepted, "judge", "disputer", committee)
            coalition = sum(amount for who, amount in s.pays.items() if isinstance(who, tuple) and who[0] == "c")
            coalition += s.pays.get("judge", 0.0) * judge_cartel + s.pays.get("disputer", 0.0) * disputer_cartel
            if s.decided:
                owner_cartel = disputer_cartel if s.overturned else judge_cartel
                coalition += final_pay(court, s.work_valid) * owner_cartel
                if ally:
                    coalition += court.reward if s.work_valid else -court.slash
            value += q * coalition
    return value


@dataclass(frozen=True)
class CartelPlan:
    """What the cartel does, decided once per scenario from its expectations (the values kept for the report)."""

    challenge_outsiders: bool
    """As judge, falsely challenge an outsider's file unchecked."""
    check_outsiders: bool
    """As judge or committee member, check an outsider's file and judge it by the check (what an honest validator
    does); else, unless it challenges them, attest it unchecked."""
    dispute_outsider_accepts: dict
    """Judge strategy → whether a cartel member disputes that judge's correct acceptance of an outsider's file."""
    dispute_ally_rejects: bool
    """Whether a cartel member disputes an honest judge's correct rejection of an ally's fabricated file."""
    values: dict


def cartel_plan(model: Model, strategies: tuple[str, ...]) -> CartelPlan:
    court, counts = model.court, {s: strategies.count(s) for s in (HONEST, LAZY, SILENT, CARTEL)}
    if counts[CARTEL] == 0:
        return CartelPlan(False, False, {}, False, {})

    def without(**parties: int) -> dict[str, int]:
        return {s: counts[s] - parties.get(s, 0) for s in counts if counts[s] - parties.get(s, 0) > 0}

    values = {}
    # a false challenge of an outsider's file by a cartel judge: final unless some honest validator audits it
    undisputed = (1 - model.audit_rate) ** counts[HONEST]
    disputed = dispute_value(court, without(cartel=1, honest=1), accepted=False, detectable=False, cartel_side=False,
                             judge_cartel=True, disputer_cartel=False, ally=False) if counts[HONEST] else 0.0
    values["false_challenge"] = undisputed * final_pay(court, False) + (1 - undisputed) * disputed
    # an outsider's file owes a forced error with probability ρ: attesting it unchecked then costs wrongVerdictSlash,
    # a challenge of it takes the jackpot; a check (cost c) finds the forced error and attests the rest
    rho = model.forced_rate
    values["attest_outsider"] = court.fee - rho * court.wrong_verdict_slash
    values["false_challenge"] += rho * model.jackpot
    values["check_outsider"] = (-model.check_cost + rho * (model.jackpot + final_pay(court, False))
                                + (1 - rho) * final_pay(court, True))
    best = max(("check_outsider", "attest_outsider", "false_challenge"), key=values.__getitem__)
    challenge, check_outsiders = best == "false_challenge", best == "check_outsider"
    # a dispute of a correct acceptance of an outsider's file, by judge strategy
    accepts = {}
    for judge in (HONEST, LAZY):
        if counts[judge]:
            v = dispute_value(court, without(cartel=1, **{judge: 1}), accepted=True, detectable=False,
                              cartel_side=False, judge_cartel=False, disputer_cartel=True, ally=False)
            values[f"dispute_{judge}_accept_of_outsider"] = v
            accepts[judge] = v > 0
    # a dispute of an honest judge's correct rejection of an ally's fabricated file (the ally's −S is sunk otherwise)
    rejects = False
    if counts[HONEST]:
        v = dispute_value(court, without(cartel=1, honest=1), accepted=False, detectable=True, cartel_side=True,
                          judge_cartel=False, disputer_cartel=True, ally=True) + court.slash
        values["dispute_rejection_of_ally"] = v
        rejects = v > 0
    return CartelPlan(challenge, check_outsiders, accepts, rejects, {k: round(v, 4) for k, v in values.items()})


# ---- the simulation ---------------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One scenario's files: each validator's payoff per file, each file's worker payoff and kind, and counts."""

    validator_pay: np.ndarray
    """files × validators."""
    worker_pay: np.ndarray
    ally: np.ndarray
    """Whether the file is a cheating (cartel-allied) worker's."""
    fabricated: np.ndarray
    assigned: np.ndarray
    """Files each validator was drawn to judge."""
    checks: np.ndarray
    """Checks each validator made over the run."""
    counts: dict
    forced: np.ndarray
    """Whether the file owed a forced error."""
    assignee: np.ndarray
    """The validator each file was drawn to (uniform: 1/V each)."""
    checked: np.ndarray
    """files × validators: who checked each file."""


def simulate(model: Model, strategies: tuple[str, ...], r: float, files: int, seed: str) -> Run:
    """`files` files through the court with validator `i` playing `strategies[i]` and cheaters fabricating at rate
    r; the random draws are the same for every `strategies` of the same length and `seed` (common random numbers)."""
    court, n_val = model.court, len(strategies)
    rng = random.Random(seed)
    plan = cartel_plan(model, strategies)
    cartel = {i for i, s in enumerate(strategies) if s == CARTEL}
    vpay = np.zeros((files, n_val))
    wpay = np.zeros(files)
    ally_of = np.zeros(files, dtype=bool)
    forced_of = np.zeros(files, dtype=bool)
    assignee_of = np.zeros(files, dtype=np.int64)
    checked_of = np.zeros((files, n_val), dtype=bool)
    fabricated_of = np.zeros(files, dtype=bool)
    assigned = np.zeros(n_val, dtype=np.int64)
    checks = np.zeros(n_val, dtype=np.int64)
    counts = dict.fromkeys(("fabricated", "fabricated_accepted", "outsider_files", "outsiders_slashed",
                            "false_challenges", "disputes", "overturned", "void", "lapsed", "forced", "forced_caught"), 0)
    verification = 0.0  # the verification budget's net outlay (jackpots and refunds less the penalties it took)
    everyone = range(n_val)
    for i in range(files):
        # the draws, in the same number and order whatever the strategies
        u_ally, u_fabricated, u_detected, u_forced = rng.random(), rng.random(), rng.random(), rng.random()
        ally = u_ally < model.cheater_share
        forced = u_forced < model.forced_rate  # owed by the worker's chain: every check flags it
        fabricated = ally and not forced and u_fabricated < r
        detectable = forced or (fabricated and u_detected < court.detect)
        assignee = rng.randrange(n_val)
        audit_draw = [rng.random() for _ in everyone]
        order = rng.sample(everyone, n_val)
        coins = rng.getrandbits(n_val)
        pay = vpay[i]
        checked: set[int] = set()

        def check(v: int) -> None:
            if v not in checked:
                checked.add(v)
                pay[v] -= model.check_cost
                checks[v] += 1
                checked_of[i, v] = True

        ally_of[i], fabricated_of[i], forced_of[i], assignee_of[i] = ally, fabricated, forced, assignee
        assigned[assignee] += 1
        counts["fabricated"] += fabricated
        counts["forced"] += forced
        counts["outsider_files"] += not ally
        worker = 0.0 if fabricated else -model.generation_cost
        judge = assignee
        if strategies[assignee] == SILENT:
            stand_in = next((v for v in order if v != assignee and strategies[v] != SILENT), None)
            if stand_in is None:  # the case lapses: the assignee pays the fee budget, the work expires
                pay[assignee] -= court.silence_penalty
                counts["lapsed"] += 1
                wpay[i] = worker
                continue
            pay[assignee] -= court.silence_penalty
            pay[stand_in] += court.silence_penalty
            judge = stand_in
        # the first verdict
        if strategies[judge] in (HONEST, AUDITLESS):
            check(judge)
            accepted = not detectable
        elif strategies[judge] == CARTEL and not ally and plan.check_outsiders:
            check(judge)
            accepted = not detectable
        elif strategies[judge] == CARTEL:  # it knows its allies' forced errors; an outsider's file unchecked
            accepted = (ally and not forced) or (not ally and not plan.challenge_outsiders)
            counts["false_challenges"] += not accepted and not ally
        else:  # lazy
            accepted = True
        # audits: the first honest auditor whose check contradicts the verdict disputes it; or the cartel disputes
        disputer = None
        for v in order:
            if v != judge and strategies[v] == HONEST and audit_draw[v] < model.audit_rate:
                check(v)
                if disputer is None and accepted == detectable:
                    disputer = v
        if disputer is None and judge not in cartel and cartel:
            wants = (plan.dispute_ally_rejects if ally and not accepted and not forced
                     else plan.dispute_outsider_accepts.get(strategies[judge], False) if not ally and accepted
                     else False)
            if wants:
                disputer = next(v for v in order if v in cartel)
        if disputer is None:  # final at the end of the dispute window
            pay[judge] += final_pay(court, accepted)
            final, void = accepted, False
        else:
            counts["disputes"] += 1
            cartel_side = (not forced) if ally else not (judge in cartel or disputer in cartel)
            seats = [v for v in order if v not in (judge, disputer)]
            void = True
            for round_ in range(DISPUTE_ROUNDS):
                if round_:
                    rng.shuffle(seats)
                committee: list[tuple[object, bool | None]] = []
                for v in seats[:court.committee_size]:
                    s = strategies[v]
                    if s in (HONEST, AUDITLESS):
                        check(v)
                        vote: bool | None = not detectable
                    elif s == CARTEL and not ally and plan.check_outsiders and cartel_side:  # none of its business
                        check(v)
                        vote = not detectable
                    elif s == CARTEL:
                        vote = cartel_side
                    elif s == LAZY:
                        vote = bool(coins >> v & 1)
                    else:
                        vote = None
                    committee.append((v, vote))
                result = settle(court, accepted, judge, disputer, committee)
                for v, amount in result.pays.items():
                    pay[v] += amount
                if result.decided:
                    void = False
                    break
            if void:
                counts["void"] += 1
                final = None
            else:
                final = result.work_valid
                counts["overturned"] += result.overturned
                pay[result.winner] += final_pay(court, final)
        if final is not None:
            worker += court.reward if final else -court.slash
            counts["fabricated_accepted"] += fabricated and final
            counts["outsiders_slashed"] += (not ally) and not final and not forced
            if forced:
                worker, outlay = _settle_forced(model, pay, strategies, judge, disputer, accepted, final, worker,
                                                [v for v in everyone if v != judge and audit_draw[v] < model.audit_rate])
                verification += outlay
                counts["forced_caught"] += not final
        wpay[i] = worker
    return Run(vpay, wpay, ally_of, fabricated_of, assigned, checks,
               counts | {"cartel_plan": plan.values, "verification_outlay": verification}, forced_of, assignee_of,
               checked_of)


def _settle_forced(model: Model, pay: np.ndarray, strategies: tuple[str, ...], judge: int, disputer: int | None,
                   accepted: bool, final: bool, worker: float, drawn: list[int]) -> tuple[float, float]:
    """ForcedErrors.settle and chargeAuditor on a forced error whose case ended `final` (contracts/src/ForcedErrors.sol):
    the party that said valid loses wrongVerdictSlash, the one that said invalid takes J; rejected, the worker's slash is
    refunded and the file's reward paid; accepted (the pool paid R), it loses S; accepted undisputed, each drawn
    auditor that is not honest (a silent one withheld its link: drawn for every file) loses wrongVerdictSlash. Returns the worker's payoff and the budget's net outlay."""
    court = model.court
    judge_said_valid = accepted
    catcher = disputer if judge_said_valid else judge
    lazy = judge if judge_said_valid else disputer
    outlay = 0.0
    if lazy is not None:
        pay[lazy] -= court.wrong_verdict_slash
        outlay -= court.wrong_verdict_slash
    if catcher is not None:
        pay[catcher] += model.jackpot
        outlay += model.jackpot
    if final:
        worker -= court.slash
        outlay -= court.slash
        if disputer is None:
            silent = [v for v, s in enumerate(strategies) if s == SILENT and v != judge]
            for v in set(drawn) | set(silent):
                if strategies[v] != HONEST:
                    pay[v] -= court.wrong_verdict_slash
                    outlay -= court.wrong_verdict_slash
    else:
        worker += court.slash + court.reward
        outlay += court.slash + court.reward
    return worker, outlay


# ---- statistics -------------------------------------------------------------------------------------------------------


def mean_ci(samples: np.ndarray, scale: float = 1.0) -> tuple[float, float, float]:
    """Mean and 95 % normal interval of `samples` × `scale`."""
    n = len(samples)
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = float(samples.mean()) * scale
    half = Z95 * float(samples.std(ddof=1)) / math.sqrt(n) * scale if n > 1 else math.inf
    return mean, mean - half, mean + half


def stratified_ci(samples: np.ndarray, strata: list[tuple[np.ndarray, float]], scale: float = 1.0
                  ) -> tuple[float, float, float]:
    """Mean and 95 % interval of `samples` × `scale` by post-stratification: `strata` are (mask, its exact probability)
    pairs that partition the files (a forced error, ρ; drawn to a given validator, 1/V). A jackpot of rare forced
    errors would otherwise swamp the plain mean's interval; the plain mean if a stratum of positive weight holds no
    file (a short run)."""
    if any(weight > 0 and not mask.any() for mask, weight in strata):
        return mean_ci(samples, scale)
    mean = var = 0.0
    for mask, weight in strata:
        if weight == 0:
            continue
        x = samples[mask]
        mean += weight * float(x.mean())
        var += weight * weight * (float(x.var(ddof=1)) / len(x) if len(x) > 1 else math.inf)
    half = Z95 * math.sqrt(var)
    return mean * scale, (mean - half) * scale, (mean + half) * scale


def mixed_ci(valid: np.ndarray, fabricated: np.ndarray, r: float) -> tuple[float, float, float]:
    """A cheater's expected payoff per file, (1 − r)·E[valid file] + r·E[fabricated file], estimated from each kind of
    its files (stratified: at r → 0 the few fabricated files would make the plain mean noisy); NaN without them."""
    parts = [(w, x) for w, x in ((1 - r, valid), (r, fabricated)) if w > 0]
    if any(len(x) == 0 for _, x in parts):
        return math.nan, math.nan, math.nan
    mean = sum(w * float(x.mean()) for w, x in parts)
    var = sum(w * w * (float(x.var(ddof=1)) / len(x) if len(x) > 1 else math.inf) for w, x in parts)
    half = Z95 * math.sqrt(var)
    return mean, mean - half, mean + half


def _r(x: float) -> float | None:
    return round(x, 4) if math.isfinite(x) else None


def _row(r: float, f: float, cartel: int, strategy: str, payoff: tuple, unit: str, **extra) -> dict:
    return {"r": r, "f": round(f, 4), "cartel": cartel, "strategy": strategy, "unit": unit, "payoff": _r(payoff[0]),
            "ci95": [_r(payoff[1]), _r(payoff[2])]} | extra


def cartel_size(f: float, validators: int) -> int:
    """The cartel's members: ⌊f·V⌋, so that a cell never holds a larger fraction than it names (1/3 of 10: 3)."""
    return math.floor(f * validators + 1e-9)


def run_cell(model: Model, r: float, f: float, files: int, seed: int) -> tuple[list[dict], dict]:
    """The payoff rows of cell (r, f) and what the booleans and the break-even read from it."""
    v = model.validators
    cartel = cartel_size(f, v)
    base = (CARTEL,) * cartel + (HONEST,) * (v - cartel)
    me = cartel  # the honest validator that deviates
    key = f"{seed}/{r!r}/{cartel}"
    runs = {"base": simulate(model, base, r, files, key)}
    for name, strategy in ((LAZY, LAZY), (SILENT, SILENT), (AUDITLESS, AUDITLESS)) + (
            ((CARTEL, CARTEL),) if cartel == 0 else ()):
        runs[name] = simulate(model, base[:me] + (strategy,) + base[me + 1:], r, files, key)
    b = runs["base"]
    per_assigned = float(v)
    rho = model.forced_rate
    by_forced = [(b.forced, rho), (~b.forced, 1 - rho)]
    mine_drawn = b.assignee == me
    by_forced_and_me = [(k & m, w * p) for k, w in by_forced for m, p in ((mine_drawn, 1 / v), (~mine_drawn, 1 - 1 / v))]
    honest = b.validator_pay[:, cartel:].mean(axis=1)
    rows = [_row(r, f, cartel, "validator honest", stratified_ci(honest, by_forced, per_assigned), "per assigned file",
                 checks_per_assigned_file=round(float(b.checks[cartel:].mean()) * v / files, 4))]
    if cartel:
        rows.append(_row(r, f, cartel, "validator cartel", stratified_ci(b.validator_pay[:, :cartel].mean(axis=1),
                                                                          by_forced, per_assigned), "per assigned file"))
    # the deviator's checks per file it is drawn to, estimated as its gains are (the same strata)
    checks_per_assigned = stratified_ci(b.checked[:, me].astype(float), by_forced_and_me, per_assigned)[0]
    gains = {}
    for name in (LAZY, SILENT, AUDITLESS, CARTEL):
        if name not in runs:
            continue
        mine = runs[name].validator_pay[:, me]
        gain = stratified_ci(mine - b.validator_pay[:, me], by_forced_and_me, per_assigned)
        gains[name] = gain
        if name == LAZY:
            checks = checks_per_assigned
            extra = {"break_even_per_check": _r(max(gain[0], 0.0) / checks) if checks else None}
        else:
            extra = {}
        label = ("validator malicious (a cartel of one)" if name == CARTEL
                 else "validator skipping audits (one deviates)" if name == AUDITLESS
                 else f"validator {name} (one deviates)")
        rows.append(_row(r, f, cartel, label, stratified_ci(mine, by_forced_and_me, per_assigned), "per assigned file",
                         gain_vs_honest=_r(gain[0]), gain_ci95=[_r(gain[1]), _r(gain[2])], **extra))
    honest_worker = mean_ci(b.worker_pay[~b.ally])
    fabricated = b.worker_pay[b.fabricated]
    cheater = mixed_ci(b.worker_pay[b.ally & ~b.fabricated], fabricated, r)
    rows.append(_row(r, f, cartel, "worker honest", honest_worker, "per submitted file"))
    rows.append(_row(r, f, cartel, f"worker cheating at r = {r:g}", cheater, "per submitted file",
                     gain_vs_honest=_r(cheater[0] - honest_worker[0]), fabricated_files=int(len(fabricated)),
                     per_fabricated_file=_r(float(fabricated.mean())) if len(fabricated) else None))
    cell = {"r": r, "f": f, "cartel": cartel, "lazy_gain": gains[LAZY][0], "silent_gain": gains[SILENT][0],
            "audit_skip_gain": gains[AUDITLESS][0], "honest_worker": honest_worker[0],
            "cheater": cheater[0], "checks_per_assigned_file": checks_per_assigned,
            "verification_per_file": b.counts["verification_outlay"] / files, "counts": b.counts}
    return rows, cell


def verdicts(cells: list[dict]) -> tuple[bool, bool, dict]:
    """`honest_check_best_response`, `cheating_unprofitable` and the break-even, from the cells (module docstring)."""
    small = [c for c in cells if c["f"] <= 1 / 3 + 1e-9]
    best_response = all(c["lazy_gain"] <= 0 for c in small)
    cheats = [c for c in cells if c["r"] > 0]
    # a cell whose run drew no fabricated file cannot tell: cheating is then not shown unprofitable there
    unprofitable = all(c["cheater"] < c["honest_worker"] for c in cheats)  # False on NaN
    near = [c for c in small if c["r"] <= NEAR_ZERO]
    worst = max(near, key=lambda c: max(c["lazy_gain"], 0) / max(c["checks_per_assigned_file"], 1e-12), default=None)
    if worst is None:
        return best_response, unprofitable, {}
    per_check = max(worst["lazy_gain"], 0) / worst["checks_per_assigned_file"] if worst["checks_per_assigned_file"] else None
    return best_response, unprofitable, {
        "per_check": _r(per_check) if per_check is not None else None,
        "per_assigned_file": _r(max(worst["lazy_gain"], 0)),
        "checks_per_assigned_file": _r(worst["checks_per_assigned_file"]),
        "at": {"r": worst["r"], "f": round(worst["f"], 4), "cartel": worst["cartel"]},
        "meaning": "what honest checking must earn per check, in expectation (audit pay, or a forced-error jackpot "
                   "J at rate e with e*J at least this), for the lazy deviation not to gain at r -> 0",
    }


# ---- the command ------------------------------------------------------------------------------------------------------


def _floats(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def _fraction(text: str) -> list[float]:
    """A list of fractions: `1/3` is accepted for a third."""
    parts = []
    for x in text.split(","):
        x = x.strip()
        if "/" in x:
            num, _, den = x.partition("/")
            try:
                parts.append(float(num) / float(den))
            except (ValueError, ZeroDivisionError):
                raise argparse.ArgumentTypeError(f"expected comma-separated fractions, got {text!r}") from None
        elif x:
            parts.extend(_floats(x))
    if not parts:
        raise argparse.ArgumentTypeError("expected at least one fraction")
    return parts


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m bench.economics", description=__doc__.splitlines()[0])
    p.add_argument("--pool", type=Path, default=DEFAULT_POOL,
                   help="pool TOML with a [pool.court] table (default examples/pool-court.toml)")
    p.add_argument("--run-spec", type=Path, default=DEFAULT_RUN_SPEC,
                   help="run spec giving maxSamplesPerWork and spotCheckBps where the pool TOML leaves them "
                        "(default examples/run.toml)")
    p.add_argument("--generation-cost", type=float,
                   help=f"tokens an honest file costs its worker; a fabricated one costs nothing (default "
                        f"{GENERATION_SHARE:g} × the file's reward R)")
    p.add_argument("--check-cost", type=float,
                   help="tokens a validator spends checking one file (default generation cost × q / 7.07: checking is "
                        "7.07× faster than generating at q = 1, bench.toploc --quick)")
    p.add_argument("--validators", type=int, default=10, help="validators of the court (default 10)")
    p.add_argument("--audit-rate", type=float, default=0.1,
                   help="share of other validators' verdicts an honest validator audits (default 0.1, as "
                        "`validator start`)")
    p.add_argument("--cheat-rate", type=_floats, default=list(DEFAULT_RATES), metavar="R,...",
                   help="cheating workers' fabrication rates r (default 0,0.001,0.1)")
    p.add_argument("--cartel", type=_fraction, default=list(DEFAULT_CARTELS), metavar="F,...",
                   help="cartel fractions f of the validators (default 0,0.1,0.2,1/3)")
    p.add_argument("--cheater-share", type=float, default=0.5,
                   help="share of the pool's files submitted by the cheating workers (default 0.5)")
    p.add_argument("--forced-bps", type=int, default=DEFAULT_FORCED_BPS,
                   help=f"ρ in basis points: the share of files whose worker owes a forced error (ForcedErrors "
                        f"forcedBps, at most 1000; 0: no forced errors, the court alone; default {DEFAULT_FORCED_BPS})")
    p.add_argument("--jackpot", type=float, default=DEFAULT_JACKPOT,
                   help=f"J in tokens: what the validator that catches a forced error takes (default {DEFAULT_JACKPOT:g})")
    p.add_argument("--files", type=int, default=20_000, help="files per cell and scenario (default 20000)")
    p.add_argument("--seed", type=int, default=0)
    add_record_option(p)
    return p


def model_of(args: argparse.Namespace) -> Model:
    court = load_court(args.pool, args.run_spec)
    if args.validators < 3:
        raise Usage("--validators must be at least 3 (a judge, a disputer and a committee member)")
    if not 0 <= args.audit_rate <= 1:
        raise Usage("--audit-rate must be in [0, 1]")
    if not 0 < args.cheater_share < 1:
        raise Usage("--cheater-share must be in (0, 1): both an honest and a cheating worker submit")
    if args.files < 2:
        raise Usage("--files must be at least 2")
    if any(not 0 <= r <= 1 for r in args.cheat_rate):
        raise Usage("--cheat-rate: every rate must be in [0, 1]")
    for f in args.cartel:
        if not 0 <= f < 1 or cartel_size(f, args.validators) > args.validators - 1:
            raise Usage(f"--cartel {f:g}: a fraction in [0, 1) that leaves at least one of the {args.validators} "
                        "validators honest")
    generation = GENERATION_SHARE * court.reward if args.generation_cost is None else args.generation_cost
    check = generation * court.spot_check_bps / MAX_BPS * CHECK_PER_GENERATION if args.check_cost is None \
        else args.check_cost
    for name, value in (("--generation-cost", generation), ("--check-cost", check)):
        if not (math.isfinite(value) and value >= 0):
            raise Usage(f"{name} must be a finite number ≥ 0")
    if not 0 <= args.forced_bps <= 1_000:
        raise Usage("--forced-bps must be in [0, 1000] (ForcedErrors.MAX_FORCED_BPS)")
    if not (math.isfinite(args.jackpot) and args.jackpot >= 0):
        raise Usage("--jackpot must be a finite number ≥ 0")
    if args.forced_bps and not 0 < args.forced_bps * args.jackpot <= MAX_BPS * court.reward:
        raise Usage(f"--jackpot {args.jackpot:g} at --forced-bps {args.forced_bps}: ForcedErrors requires 0 < ρ·J ≤ R "
                    f"= {court.reward:g} (rule 6, R1.22)")
    return Model(court, args.validators, args.audit_rate, check, generation, args.cheater_share,
                 args.forced_bps / MAX_BPS, args.jackpot if args.forced_bps else 0.0)


def _fmt(row: dict) -> str:
    lo, hi = row["ci95"]
    half = (hi - lo) / 2 if lo is not None and hi is not None and math.isfinite(hi) else math.nan
    text = f"{row['payoff']:>10.3f} ± {half:<7.3f}" if row["payoff"] is not None else f"{'—':>10}  {'':<7}"
    if "gain_ci95" in row:
        glo, ghi = row["gain_ci95"]
        text += f"  gain {row['gain_vs_honest']:+.3f} [{glo:+.3f}, {ghi:+.3f}]"
    elif "gain_vs_honest" in row and row["gain_vs_honest"] is not None:
        text += f"  gain {row['gain_vs_honest']:+.3f}"
    return text


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parser().parse_args(argv)
        model = model_of(args)
    except Usage as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    c = model.court
    start = time.monotonic()
    print(f"court: R {c.reward:g}, S {c.slash:g}, b·S {c.bounty:g}, fee {c.fee:g}, wrongVerdictSlash "
          f"{c.wrong_verdict_slash:g}, disputeBond {c.dispute_bond:g}, nonVoterPenalty {c.non_voter_penalty:g} (vote "
          f"pay {c.vote_pay:g}), silencePenalty {c.silence_penalty:g}, k {c.committee_size}, q {c.spot_check_bps / MAX_BPS:g} "
          f"(detects 1 fabricated of {c.samples_per_work} with p {c.detect:.4g}); V {model.validators}, audit rate "
          f"{model.audit_rate:g}, check cost {model.check_cost:.4g}, generation cost {model.generation_cost:.4g}, "
          f"cheater share {model.cheater_share:g}; {args.files} files a scenario; tokens", flush=True)
    rows, cells = [], []
    for r, f in product(args.cheat_rate, args.cartel):
        cell_rows, cell = run_cell(model, r, f, args.files, args.seed)
        rows += cell_rows
        cells.append(cell)
        print(f"r = {r:g}, f = {f:.3g} ({cell['cartel']} of {model.validators} in the cartel; disputes "
              f"{cell['counts']['disputes']}, overturned {cell['counts']['overturned']}, false challenges "
              f"{cell['counts']['false_challenges']}, fabricated accepted {cell['counts']['fabricated_accepted']} of "
              f"{cell['counts']['fabricated']})", flush=True)
        width = max(len(row["strategy"]) for row in cell_rows)
        for row in cell_rows:
            print(f"  {row['strategy']:<{width}}  {_fmt(row)}")
    best_response, unprofitable, break_even = verdicts(cells)
    small = [c for c in cells if c["f"] <= 1 / 3 + 1e-9]
    audit_best = all(c["audit_skip_gain"] <= 0 for c in small)
    silence_loses = all(c["silent_gain"] <= 0 for c in small)
    outlay = max(c["verification_per_file"] for c in cells)
    print(f"honest checking is each validator's best response (f ≤ 1/3): {best_response}")
    print(f"  auditing too (skipping audits does not gain): {audit_best}; silence does not gain: {silence_loses}")
    if model.forced_rate:
        print(f"forced errors: ρ {model.forced_rate:g}, J {model.jackpot:g}; the verification budget pays at most "
              f"{outlay:.3f} tokens a file net of the penalties it takes ({outlay / c.reward:.1%} of R)")
    print(f"cheating is unprofitable for a worker (every r > 0): {unprofitable}")
    undetermined = [{"r": c["r"], "cartel": c["cartel"]} for c in cells if c["r"] > 0 and math.isnan(c["cheater"])]
    if undetermined:
        print(f"  (no fabricated file was drawn in {len(undetermined)} cell(s) with r > 0, so cheating is not shown "
              "unprofitable there: raise --files)")
    if break_even:
        print(f"break-even: {break_even['per_check']} tokens a check ({break_even['per_assigned_file']} per assigned "
              f"file) must be paid to honest checking at r → 0 (worst cell r = {break_even['at']['r']:g}, "
              f"{break_even['at']['cartel']} in the cartel)")
    result = {
        "honest_check_best_response": best_response,
        "honest_audit_best_response": audit_best,
        "silence_unprofitable": silence_loses,
        "verification_per_file": _r(outlay),
        "cheating_unprofitable": unprofitable,
        "break_even": break_even,
        "cheating_undetermined_cells": undetermined,
        "payoff_table": rows,
        "parameters": {"pool": _shown(args.pool), "court": asdict(c), "validators": model.validators,
                       "audit_rate": model.audit_rate, "check_cost": _r(model.check_cost),
                       "generation_cost": _r(model.generation_cost), "cheater_share": model.cheater_share,
                       "forced_rate": model.forced_rate, "jackpot": model.jackpot,
                       "cheat_rates": args.cheat_rate, "cartel_fractions": [round(f, 4) for f in args.cartel],
                       "files": args.files, "seed": args.seed},
        "cartel_plans": {f"r={cell['r']:g},cartel={cell['cartel']}": cell["counts"]["cartel_plan"] for cell in cells
                         if cell["counts"]["cartel_plan"]},
        "wall_s": round(time.monotonic() - start, 1),
    }
    emit(result, args, "economics", argv)
    return 0


def _shown(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


if __name__ == "__main__":
    exit_on_signals()
    sys.exit(main())
