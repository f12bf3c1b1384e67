"""The bond a validator or worker locks in ForcedErrors with its hash chain (docs/protocol.md R9.25), taken back:
`validator withdraw --chain-bond` and `worker deallocate --chain-bond` (`withdrawBond`, which only the holder may send).

The bond returns to the holder's free bonded stake once its chain's last epoch is settled (`settledBy`: that epoch's
reveal window closed, then the court's exit delay) and no later chain has taken it over: a running daemon commits its
next chain when the last is settled, carrying the bond, so stop the daemon first. A bond still locked is refused
before any transaction, with one line saying when it can be withdrawn.
"""

from __future__ import annotations

from cli.errors import UsageError
from cli.output import date, tokens
from ledger_client.chain.errors import LedgerError
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import chain_time
from protocol.hashchain import Role


def withdraw_chain_bond(ledger: Ledger, pool_id: int, role: Role) -> dict:
    """`withdrawBond` for this key's chain of `role` in `pool_id`; returns what was returned and the free bonded stake
    after. A pool without forced errors, or no bond, is a `UsageError`; a bond still locked a `LedgerError` naming the
    date (and how many seconds away) from which it can be withdrawn."""
    fe = ledger.forced_errors
    if fe is None or fe.get_params(pool_id).forced_bps == 0:
        raise UsageError(f"pool {pool_id} has no forced errors: no hash-chain bond to withdraw")
    chain = fe.get_chain(pool_id, role, ledger.address)
    who = role.name.lower()
    if chain.locked == 0:
        raise UsageError(f"{ledger.address} has no {who} hash-chain bond locked in pool {pool_id}")
    ready = fe.settled_by(pool_id, chain.end_epoch) + 1
    now = chain_time(ledger)
    if now < ready:
        raise LedgerError(f"the {who} hash-chain bond of {tokens(chain.locked)} in pool {pool_id} is locked until its "
                          f"chain's last epoch ({chain.end_epoch}) is settled: withdrawable from {date(ready)} "
                          f"(in {ready - now} s; stop the daemon first, or it commits a new chain that keeps it)")
    fe.withdraw_bond(pool_id, int(role))
    return {"pool_id": pool_id, "chain_bond_withdrawn": chain.locked, "free_bonded": ledger.stake.bonded_of(ledger.address)}
