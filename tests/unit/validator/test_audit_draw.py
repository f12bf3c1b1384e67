"""A validator's audit draws come from its private key (validator.court.audit_key): the same after a restart, at the
configured rate, and not computable from its public address — the judge cannot aim a false challenge at the
verdicts nobody audits (issue 43, item 1; docs/protocol.md §9, "Why honest play is each validator's best response")."""

from __future__ import annotations

import hashlib
from eth_account import Account

from validator.court import audit_key, audits


class _Ledger:
    """The one thing audit_key reads: the validator's account."""

    def __init__(self, account):
        self.account = account


KEYS = [hashlib.sha256(f"validator {i}".encode()).digest() for i in range(3)]
WORK_IDS = [hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(4000)]


def _drawn(key: bytes, rate: float) -> set[bytes]:
    return {w for w in WORK_IDS if audits(key, w, rate)}


def test_the_draws_are_the_keys_own_and_a_restart_draws_the_same():
    account = Account.from_key(KEYS[0])
    assert audit_key(_Ledger(account)) == audit_key(_Ledger(Account.from_key(account.key)))
    other = audit_key(_Ledger(Account.from_key(KEYS[1])))
    mine = _drawn(audit_key(_Ledger(account)), 0.25)
    assert 0.22 < len(mine) / len(WORK_IDS) < 0.28  # 4,000 draws at 0.25: ±3 % is ~4.4 standard deviations
    assert mine != _drawn(other, 0.25)


def test_the_public_address_does_not_give_the_draws():
    """The old draw, sha256(address ‖ workId) < rate, is what a judge could compute: the new one differs from it."""
    account = Account.from_key(KEYS[2])
    public = {w for w in WORK_IDS
              if int.from_bytes(hashlib.sha256(account.address.lower().encode() + w).digest()[:8], "big") / 2**64 < 0.25}
    mine = _drawn(audit_key(_Ledger(account)), 0.25)
    overlap = len(mine & public) / len(mine)
    assert overlap < 0.35  # independent draws overlap at the rate (0.25); the address tells the judge nothing


def test_rate_one_audits_everything_and_rate_zero_nothing():
    key = audit_key(_Ledger(Account.from_key(KEYS[0])))
    assert _drawn(key, 1.0) == set(WORK_IDS) and _drawn(key, 0.0) == set()
