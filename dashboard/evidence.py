"""The reason for a verdict, readable: an evidence document explained, and the checks an accepted work passed.

A challenge names a reason code and the digest of an evidence document (protocol.verdicts.Evidence) that the
validator put on IPFS; `explain` turns that document into what a worker wants to know: which check failed, on
which completions, positions or proof chunks, what was measured against which threshold, and the spot-check
draw (q, n, m, indices, the block hash they come from), re-derived here from the block hash and the work id so
that a reader can see the validator did not pick them. An attestation carries no document: `checks_passed`
says what a protocol validator checks before attesting and re-derives which completions got the expensive
checks from the same public inputs. Pure functions of their arguments (no chain, no IPFS).

An evidence document is anyone's JSON (whoever put it on IPFS and named it on-chain): nothing here assumes its shape.
What the explanation shows of it is taken only where it has the kind its field names (`_int`, `_str`, `_ints`,
`_dict`), and a document whose measurements cannot be read explains without them.
"""

from __future__ import annotations

import math

from pydantic import JsonValue

from dashboard.chain_source import Reason
from dashboard.models import (
    WORST_COMPLETIONS,
    CheckCount,
    ChecksPassed,
    EvidenceExplanation,
    Explanation,
    FailingCompletion,
    FailingSummary,
    FindingExplanation,
    Measurement,
    SpotCheckDraw,
    UnreadableExplanation,
)
from protocol.digest import hex_text
from protocol.spotcheck import MAX_BPS, spot_check_count, spot_check_indices, spot_check_randomness
from protocol.verdicts import TOPLOC_MISSING_STAT

# Which check each reason reports, in the order the validator runs them (validator/checks.py).
CHECKS = {
    Reason.UNAVAILABLE: ("fetch", "the rollout file could not be fetched from IPFS in time"),
    Reason.DIGEST_MISMATCH: ("fetch", "the fetched bytes do not hash to the submitted digest"),
    Reason.SCHEMA: ("schema", "the file is not a valid rollout file within the pool's bounds"),
    Reason.WRONG_WORKER: ("identity", "the file names another worker"),
    Reason.WRONG_STEP: ("identity", "the file's policy step or checkpoint differs from the submission's"),
    Reason.STALE: ("identity", "the policy step is older than the pool's async level allows"),
    Reason.SAMPLE_COUNT: ("identity", "the sample count differs from the file or the run spec"),
    Reason.ASSIGNMENT: ("assignment", "the prompts are not the ones assigned to (worker, nonce)"),
    Reason.REWARD: ("reward", "reported rewards differ from the task verifier's"),
    Reason.TERMINATION: ("termination", "a completion ended without EOS before max_tokens, or with an implausible EOS"),
    Reason.SAMPLING: ("sampling replay", "sampled tokens do not replay from the seeded noise and recomputed logits"),
    Reason.TOPLOC: ("TOPLOC", "activation proofs do not match the declared policy"),
    Reason.SEED: ("seeds", "sampling seeds are not the derived ones"),
    Reason.LOGPROBS: ("logprobs", "reported per-token logprobs differ from the recomputed ones (a check no longer made)"),
    Reason.UNCHECKABLE: ("checker", "the file crashed or timed out the checker on every attempt"),
    Reason.WRONG_BINDING: ("identity", "the file is bound to another chain, pool contract, pool or nonce"),
    Reason.DISPUTE: ("dispute", "the work was attested first; the dispute committee's majority voted it invalid"),
}

CHEAP_CHECKS = ["schema and pool bounds", "identity (chain, pool contract, pool, worker, step, nonce, checkpoint)",
                "sample count", "prompt assignment", "rewards (task verifier)", "seeds", "token ranges",
                "EOS placement"]
"""Checks every completion of a file gets (validator/checks.py)."""
SPOT_CHECKS = ["termination (EOS probability)", "sampling replay", "TOPLOC proofs"]
"""Checks the spot-checked completions get (one prefill of the declared checkpoint each)."""


def _int(value: JsonValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: JsonValue) -> str | None:
    return value if isinstance(value, str) else None


def _ints(value: JsonValue) -> list[int] | None:
    """A list of integers, or None for anything else."""
    if not isinstance(value, list) or not all(_int(v) is not None for v in value):
        return None
    return [v for v in value if isinstance(v, int)]


def _dict(value: JsonValue) -> dict[str, JsonValue]:
    return value if isinstance(value, dict) else {}


def _reason(code: int | None, name: str | None) -> Reason | None:
    try:
        return Reason(code) if code is not None else Reason[name] if name else None
    except (ValueError, KeyError):
        return None


def _row(what: str, measured: JsonValue, threshold: JsonValue, ok: bool | None, completion: int | None = None,
         chunk: int | None = None, rule: str = "") -> Measurement:
    return Measurement(what=what, completion=completion, chunk=chunk, measured=measured, threshold=threshold,
                       rule=rule, passes=ok)


NO_EXPONENT_MATCHED = "none: no exponent matched"
"""What a chunk's mantissa error reads as when the proof's sentinel (2^64) stands for it."""


def _mantissa(values: list, chunk: int) -> JsonValue:
    """A chunk's mantissa statistic as measured, or `NO_EXPONENT_MATCHED` for the sentinel."""
    value = values[chunk]
    return NO_EXPONENT_MATCHED if isinstance(value, (int, float)) and value >= TOPLOC_MISSING_STAT else value


def _toploc_rows(details: dict, thresholds: dict, completion: int | None) -> list[Measurement]:
    """One row per measured quantity of each failing chunk (a chunk passes when enough exponents match and the
    mantissa errors' mean and median are within bounds: proofs/toploc.py)."""
    t = details.get("thresholds") or thresholds or {}
    per = t.get("per_points") or 128
    rows = []
    mism = details.get("exp_mismatches") or []
    means = details.get("mant_err_mean") or []
    medians = details.get("mant_err_median") or []
    lengths = details.get("chunk_tokens") or []
    for chunk in details.get("failing_chunks") or []:
        if not isinstance(chunk, int):
            continue
        limits = _calibrated_limits(t, lengths[chunk]) if chunk < len(lengths) else None
        if limits is not None:  # a calibrated pool judges each chunk by the limits of its length alone
            rows += _chunk_limit_rows(limits, chunk, completion, mism, means, medians)
            continue
        if chunk < len(mism) and "min_exp_matches" in t:
            matches = per - mism[chunk]
            rows.append(_row("exponent matches", matches, t["min_exp_matches"], matches >= t["min_exp_matches"],
                             completion, chunk, "≥"))
        if chunk < len(means) and "max_mant_err_mean" in t:
            rows.append(_row("mantissa error, mean", _mantissa(means, chunk), t["max_mant_err_mean"],
                             means[chunk] <= t["max_mant_err_mean"], completion, chunk, "≤"))
        if chunk < len(medians) and "max_mant_err_median" in t:
            rows.append(_row("mantissa error, median", _mantissa(medians, chunk), t["max_mant_err_median"],
                             medians[chunk] <= t["max_mant_err_median"], completion, chunk, "≤"))
    return rows


def _calibrated_limits(thresholds: dict, tokens: int) -> dict | None:
    """The calibrated limits of a chunk of `tokens` tokens (proofs.toploc_thresholds.Thresholds.for_tokens)."""
    return next((lim for lim in thresholds.get("by_tokens") or [] if tokens and lim["tokens"] >= tokens), None)


def _chunk_limit_rows(limits: dict, chunk: int, completion: int | None, mism: list, means: list,
                      medians: list) -> list[Measurement]:
    rule = f"limits of chunks of ≤ {limits['tokens']} tokens"
    rows = []
    for what, values, key in (("exponent mismatches", mism, "max_exp_mismatches"),
                              ("mantissa error, mean", means, "max_mant_err_mean"),
                              ("mantissa error, median", medians, "max_mant_err_median")):
        if chunk < len(values):
            rows.append(_row(what, _mantissa(values, chunk), limits[key], values[chunk] <= limits[key], completion,
                             chunk, f"≤ ({rule})"))
    return rows


def _margin_rows(t: dict) -> list[Measurement]:
    """The sampler's margin test (proofs/margins.py): the file's and its most deviant completion's bounds against
    half the false-positive rate, and the margin sum against the score that would be challenged."""
    half = t.get("false_positive_rate", 0) / 2
    rows = [_row(f"bound on the file's margin sum ({t.get('tokens')} tokens)", math.exp(t.get("log_p_value", 0.0)),
                 half, math.exp(t.get("log_p_value", 0.0)) > half, rule=">")]
    if t.get("worst_completion") is not None:
        worst = math.exp(t.get("worst_completion_log_p_value", 0.0))
        rows.append(_row("bound of the most deviant completion (× completions)", worst, half, worst > half,
                         t["worst_completion"], rule=">"))
    rows.append(_row("margin sum (each margin rounded up to the null's next level)", t.get("score"), t.get("threshold"),
                     None, rule="vs the score challenged"))
    return rows


def _exact_rows(d: dict, completion: int | None) -> list[Measurement]:
    """An exact pool's replay with tolerance zero (docs/protocol.md R5.8): at the first deviating position, the
    worker's token against the rule's draw, and both tokens' Q16 scores (z + g) and logits."""
    at = f"at position {d.get('position')}"
    return [_row(f"token {at} (worker's vs the exact replay's draw)", d.get("got"), d.get("expected"), False,
                 completion, rule="="),
            _row(f"Q16 score z + g of the worker's token {at} vs the draw's", d.get("got_score"),
                 d.get("expected_score"), None, completion, rule="vs the draw's"),
            _row(f"Q16 logit of the worker's token {at} vs the draw's", d.get("got_logit"), d.get("expected_logit"),
                 None, completion, rule="vs the draw's")]


def _count_rows(t: dict) -> list[Measurement]:
    """TOPLOC's chunk-count test (proofs.toploc.chunk_count_test): the file's chunks above their length's honest
    90 % level against what an honest file averages, and the bound on that count against the false-positive rate."""
    bound, rate = math.exp(t.get("log_p_value", 0.0)), t.get("false_positive_rate", 0)
    return [_row(f"chunks above their length's honest 90 % level (of {t.get('chunks')})", t.get("exceeding"),
                 round(t.get("expected", 0.0), 1), None, rule="vs an honest file's mean"),
            _row("bound on that count", bound, rate, bound > rate, rule=">")]


def _measurements(reason: Reason | None, doc: dict[str, JsonValue], completion: int | None) -> list[Measurement]:
    """The measured values the document states against their thresholds (none when it states them in a shape
    these rows do not read: a hostile or garbled document still explains)."""
    try:
        return _measured(reason, doc, completion)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError):
        return []


def _measured(reason: Reason | None, doc: dict[str, JsonValue], completion: int | None) -> list[Measurement]:
    stats = _dict(doc.get("statistics"))
    details = _dict(stats.get("first_failure"))
    rows: list[Measurement] = []
    if reason == Reason.TOPLOC and isinstance(stats.get("chunk_count_test"), dict):
        rows = _count_rows(stats["chunk_count_test"])
    elif reason == Reason.TOPLOC:
        rows = _toploc_rows(details, _dict(doc.get("thresholds")), completion)
    elif reason == Reason.SAMPLING and isinstance(stats.get("exact_deviation"), dict):
        rows = _exact_rows(stats["exact_deviation"], completion)
    elif reason == Reason.SAMPLING and isinstance(stats.get("margin_test"), dict):
        rows = _margin_rows(stats["margin_test"])
    elif reason == Reason.SAMPLING and "max_score_gap" in details:
        gap, tol = details["max_score_gap"], details.get("logit_tolerance")
        rows.append(_row("largest score gap of a token that does not replay", gap, tol,
                         None if tol is None else gap <= tol, completion, rule="≤"))
    elif reason == Reason.LOGPROBS and "max_abs_diff" in details:
        diff, tol = details["max_abs_diff"], details.get("tolerance")
        rows.append(_row("largest |reported − recomputed| logprob", diff, tol,
                         None if tol is None else diff <= tol, completion, rule="≤"))
    elif reason == Reason.TERMINATION and "eos_prob" in details:
        rows.append(_row("EOS probability at the last position", details["eos_prob"], None, False, completion))
    if not rows:  # identity, binding, spec mismatches: {"field": {"file": x, "chain"|"pool": y}}
        for key, value in stats.items():
            if isinstance(value, dict) and "file" in value:
                expected = value.get("chain", value.get("pool"))
                rows.append(_row(key, value["file"], expected, value["file"] == expected, rule="="))
    return rows


def verify_draw(spot: dict[str, JsonValue], work_id: str) -> SpotCheckDraw:
    """The spot check of an evidence document, re-derived: q, n, m and whether the indices and randomness are
    the ones the block hash and work id give (`verified`; None when q = 1, nothing drawn)."""
    bps, n, indices, block = _int(spot.get("spot_check_bps")), _int(spot.get("n")), spot.get("indices"), \
        _int(spot.get("submission_block"))
    block_hash, randomness = _str(spot.get("block_hash")), _str(spot.get("randomness"))
    out = SpotCheckDraw(q=None if bps is None else bps / MAX_BPS, spot_check_bps=bps, n=n, m=_int(spot.get("m")),
                        indices=_ints(indices), submission_block=block, seed_block=None if block is None else block + 1,
                        block_hash=block_hash, randomness=randomness,
                        min_checked_tokens=_int(spot.get("min_checked_tokens")), verified=None)
    try:
        if bps is None or n is None:
            return out
        if spot.get("block_hash") is None:  # q = 1: every completion, no draw
            out.verified = (spot_check_count(n, bps) >= n and isinstance(indices, list) and len(indices) == n
                            and indices == list(range(n)))
            return out
        if block_hash is None:  # a hash that is no string
            out.verified = False
            return out
        if not (isinstance(indices, list) and spot_check_count(n, bps) <= len(indices) <= n):
            out.verified = False  # drawing a hostile n (10^12 completions) would cost what the document does not
            return out
        drawn = spot_check_randomness(bytes.fromhex(block_hash[2:]), bytes.fromhex(work_id[2:]))
        floor, lengths = _int(spot.get("min_checked_tokens")) or 0, _ints(spot.get("completion_tokens"))
        out.verified = hex_text(drawn) == randomness and spot_check_indices(drawn, n, bps, lengths, floor) == indices
    except (ValueError, TypeError, OverflowError):
        out.verified = False
    return out


def summarize(completions: list[FailingCompletion], measurements: list[Measurement],
              spot: SpotCheckDraw | None) -> FailingSummary:
    """The failing completions counted (of the file's n, of the m checked), their failing proof chunks, how many
    measured values fail each quantity, and the worst few: the most failing chunks, then positions, then the
    lowest index."""
    by_check: dict[str, int] = {}
    for m in measurements:
        if m.passes is False:
            by_check[m.what] = by_check.get(m.what, 0) + 1
    worst = sorted(completions, key=lambda c: (-len(c.chunks), -len(c.positions), c.completion))
    return FailingSummary(completions=len(completions), of=spot.n if spot else None, checked=spot.m if spot else None,
                          chunks=sum(len(c.chunks) for c in completions),
                          by_check=[CheckCount(what=w, failing=n) for w, n in by_check.items()],
                          worst=[c.completion for c in worst[:WORST_COMPLETIONS]])


def explain(doc: JsonValue, work_id: str | None = None) -> Explanation:
    """A challenge's evidence document (or a dispute's) as: the check that failed and what it means, the
    failing completions with their positions and proof chunks, measured values against thresholds, and the
    re-derived spot-check draw. Documents that are not evidence (a dispute's "every check passed") come back
    with their finding."""
    if not isinstance(doc, dict):
        return UnreadableExplanation(kind="unreadable", summary="the document is not a JSON object")
    if "reason_code" not in doc and "reason" not in doc:
        return FindingExplanation(kind="finding", summary=str(doc.get("finding") or "no finding stated"),
                                  validator=_str(doc.get("validator")))
    code, name = _int(doc.get("reason_code")), _str(doc.get("reason"))
    reason = _reason(code, name)
    check, meaning = CHECKS.get(reason, ("unknown", f"reason code {doc.get('reason_code')}"))
    samples = doc.get("failing_samples")
    failing = [i for i in samples if isinstance(i, int) and not isinstance(i, bool)] if isinstance(samples, list) \
        else []
    statistics = _dict(doc.get("statistics"))
    details = _dict(statistics.get("first_failure"))
    exact_position = _dict(statistics.get("exact_deviation")).get("position")  # an exact pool's first deviation
    positions = _ints(details.get("failed_positions")) or _ints([exact_position]) or []
    chunks = {str(k): _ints(v) or [] for k, v in _dict(doc.get("failing_chunks")).items()}
    first = failing[0] if failing else None
    completions = [FailingCompletion(completion=i, chunks=chunks.get(str(i), []),
                                     positions=positions if i == first else [])
                   for i in failing]
    spot = doc.get("spot_check")
    draw = verify_draw(spot, work_id or _str(doc.get("work_id")) or "") if isinstance(spot, dict) else None
    measurements = _measurements(reason, doc, first)
    return EvidenceExplanation(
        kind="evidence", reason=reason.name if reason else name, reason_code=code, check=check, meaning=meaning,
        summary=_str(doc.get("message")) or meaning, validator=_str(doc.get("validator")),
        failing_completions=completions, failing_summary=summarize(completions, measurements, draw),
        measurements=measurements, thresholds=doc.get("thresholds") or {}, spot_check=draw)


def checks_passed(n: int, spot_check_bps: int, work_id: str, block_hash: str | None,
                  submission_block: int, min_checked_tokens: int = 0) -> ChecksPassed:
    """What a protocol validator checked before attesting a file of `n` completions: the cheap checks on all,
    the expensive ones on the m = ceil(q·n) completions drawn from the hash of block B + 1 and the work id
    (None while that block does not exist), and on more of the same draw where the run spec's floor of checked
    tokens needed them (the indices then None: they depend on the file's completion lengths)."""
    m = spot_check_count(n, spot_check_bps)
    out = ChecksPassed(all_completions=CHEAP_CHECKS, spot_checks=SPOT_CHECKS, n=n, m=m, q=spot_check_bps / MAX_BPS,
                       spot_check_bps=spot_check_bps, submission_block=submission_block,
                       seed_block=submission_block + 1, block_hash=block_hash, randomness=None, indices=None,
                       min_checked_tokens=min_checked_tokens)
    if m >= n:
        out.indices = list(range(n))
    elif block_hash is not None:
        randomness = spot_check_randomness(bytes.fromhex(block_hash[2:]), bytes.fromhex(work_id[2:]))
        out.randomness = hex_text(randomness)
        if not min_checked_tokens:
            out.indices = spot_check_indices(randomness, n, spot_check_bps)
    return out
