"""`make demo`'s closing summary for people (issue 47, finding 8): at most 80 columns, amounts in tokens with the
stake token's symbol, the run's length as a duration, counts as `name: count` lines, no Python repr; summary.json
keeps base units."""

from __future__ import annotations

import json
import re

from examples.demo_table import summary_lines

WORKER, ADVERSARY = "0x976EA74026E726554dB657fA54763abd0C3a0aa9", "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f"
E18 = 10**18


def _summary() -> dict:
    """A 58-step run's summary.json (every slash of the adversarial worker and validator kept in the total, a few in
    the list), with the token symbol it now records."""
    slashed = [{"worker": WORKER, "amount": 50 * E18}] * 66 + [{"worker": ADVERSARY, "amount": 60 * E18}] * 24
    return {
        "chain_id": 31337, "pool_id": 1, "steps": 58, "submitted": 503, "accepted": 437,
        "challenged": {"ASSIGNMENT": 6, "SAMPLING": 15, "TOPLOC": 5, "DISPUTE": 24, "REWARD": 7, "TERMINATION": 5,
                       "UNAVAILABLE": 4},
        "adversary_submissions": 66, "adversary_challenged": 66, "adversary_pending": 0, "honest_challenged": 0,
        "checks": {"every_judged_adversary_submission_challenged": True, "no_honest_submission_challenged": True,
                   "no_honest_validator_lost_stake": True, "every_overturned_verdict_slashed": True,
                   "trainer_consumed_only_final_accepted_work": True},
        "validators": [
            {"name": "validator", "conduct": "honest", "address": "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
             "verdicts": 171, "verdicts_overturned": 0, "disputes_won": 6, "disputes_lost": 0, "disputes_open": 0,
             "stake_change": 0, "earned": 651770000000000000000},
            {"name": "validator2", "conduct": "honest", "address": "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955",
             "verdicts": 146, "verdicts_overturned": 0, "disputes_won": 18, "disputes_lost": 0, "disputes_open": 0,
             "stake_change": 0, "earned": 1451640000000000000000},
            {"name": "adversarial-validator", "conduct": "attest-all", "address": ADVERSARY, "verdicts": 186,
             "verdicts_overturned": 24, "disputes_won": 0, "disputes_lost": 0, "disputes_open": 0,
             "stake_change": -1440000000000000000000, "earned": 1620000000000000000}],
        "dishonest_validator_stake_change": -1440000000000000000000,
        "slashed": slashed, "slashed_total": 4740000000000000000000, "token": "PSWD",
        "claimed": [{"worker": "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65", "amount": 270080000000000000000},
                    {"worker": "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc", "amount": 289280000000000000000}],
        "accuracy_start": 0.07, "accuracy_end": 0.67, "consumed": 431, "consumed_unaccepted": 0,
        "consumed_overturned": 0, "wall_s": 478.3, "reward_per_sample": 10**16, "slash_amount": 50 * E18,
    }


def test_the_closing_summary_reads_at_80_columns_in_tokens_without_reprs() -> None:
    summary = _summary()
    lines = summary_lines(summary)
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    text = "\n".join(lines)
    assert not re.search(r"[{}\[\]]|'\w+'|True|False|None", text), text  # no dict, list, string or bool repr
    assert not re.search(r"\b\d{10,}\b", text), text  # no base units
    assert lines[0] == "proofswarm demo: pool 1, 58 trainer steps, 7 min"
    assert "files: 503 submitted, 437 accepted, 66 challenged" in lines
    reasons = lines[lines.index("files: 503 submitted, 437 accepted, 66 challenged") + 1:][:7]
    assert reasons == ["  DISPUTE: 24", "  SAMPLING: 15", "  REWARD: 7", "  ASSIGNMENT: 6", "  TERMINATION: 5",
                       "  TOPLOC: 5", "  UNAVAILABLE: 4"]
    assert "slashed: 4740 PSWD in 90 slashes" in lines
    assert f"  {WORKER}: 3300 PSWD in 66 slashes" in lines and f"  {ADVERSARY}: 1440 PSWD in 24 slashes" in lines
    assert "    stake change -1440 PSWD, earned 1.62 PSWD" in lines
    assert "    stake change 0 PSWD, earned 1451.64 PSWD" in lines
    assert "  0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65: 270.08 PSWD" in lines
    assert "  no_honest_submission_challenged: passed" in lines
    assert json.loads(json.dumps(summary))["slashed_total"] == 4740 * E18  # summary.json: base units


def test_a_failed_check_an_unfinished_run_and_no_claims_say_so() -> None:
    summary = _summary() | {"accuracy_start": None, "accuracy_end": None, "claimed": [], "slashed": [],
                            "slashed_total": 0, "challenged": {}, "adversary_pending": 3, "wall_s": 59.6}
    summary["checks"] = summary["checks"] | {"no_honest_submission_challenged": False}
    lines = summary_lines(summary)
    assert lines[0].endswith(", 60 s")
    assert "files: 503 submitted, 437 accepted, 0 challenged" in lines and "  DISPUTE: 24" not in lines
    assert "held-out accuracy: - at the start, - at the end" in lines
    assert "adversary's files: 66 submitted, 66 challenged, 3 still pending" in lines
    assert "slashed: 0 PSWD in 0 slashes" in lines and "claimed: none" in lines
    assert "  no_honest_submission_challenged: FAILED" in lines
