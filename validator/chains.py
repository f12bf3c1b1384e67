"""A court validator's committed hash chain in a pool with forced errors (docs/protocol.md R9.25–R9.27).

`AuditChain` is the validator's `CommittedChain` (ledger_client.chain.hashchains: committed with the pool's
`validatorBond`, a link revealed each epoch inside its window, the secret derived from the key so that a restart —
kill -9 included — goes on from the chain's on-chain state and never reveals twice). It draws this validator's
audits from the chain — file `w` of epoch e iff `keccak(σ_e ‖ β_e ‖ w) < auditBps/10000` (β_e: the epoch's beacon,
R9.29), the rule `ForcedErrors.isAudited` checks on-chain after the reveal — and settles the forced errors it caught
for the jackpot.
"""

from __future__ import annotations

import logging

from ledger_client.chain.errors import ContractRevert, TransactionFailed
from ledger_client.chain.hashchains import CommittedChain
from ledger_client.chain.ledger import Ledger
from protocol.hashchain import Role, drawn
from protocol.pool import CaseState

log = logging.getLogger("proofswarm.validator")


class AuditChain(CommittedChain):
    """This validator's chain in one pool: None from `of` when the pool has no forced errors."""

    @classmethod
    def of(cls, ledger: Ledger, pool_id: int, role: Role = Role.VALIDATOR, spare: int = 0) -> AuditChain | None:
        return super().of(ledger, pool_id, role, spare)

    def audits(self, work_id: bytes, submitted_at: int) -> bool | None:
        """Whether this validator is drawn to audit `work_id` (submitted at chain time `submitted_at`); None when no
        chain of its covers the file's epoch (then it is not chargeable for it: `chargeAuditor`). While the epoch's
        beacon is pending the draw cannot be known yet: it audits (a drawn auditor that let a forced error stand
        loses `wrongVerdictSlash`)."""
        value = self.link_at(submitted_at)
        if value is None:
            return None
        beacon = self.beacon(self.epoch(submitted_at))
        return True if beacon is None else drawn(value, beacon, work_id, self.params.audit_bps)

    def settle(self, owed: dict[str, list], now: int) -> int:
        """`settle` each file of `owed` (work id hex → [submission time, judge, disputer]: one this validator said
        invalid) whose epoch's reveal window has closed and whose case is final: a forced error pays this validator
        the jackpot (R9.26), withdrawn at once. Settled, not forced, voided, or withheld by its worker (the worker
        loses then, which is not our pay): dropped from `owed`. Returns how many paid."""
        court, paid = self.ledger.court, 0
        for key, (submitted_at, judge, disputer) in list(owed.items()):
            if now <= self.settled_after(submitted_at):
                continue
            work_id = bytes.fromhex(key)
            state = court.cases(work_id).state
            if state not in (CaseState.FINAL, CaseState.VOID):
                continue
            try:
                if state == CaseState.FINAL and self.fe.is_forced(work_id):
                    self.fe.settle(work_id, judge, disputer)
                    paid += 1
                    log.info("work 0x%s: a forced error we caught, settled: the jackpot is ours", key)
            except ContractRevert as exc:  # withheld by its worker, or settled by someone else
                log.info("work 0x%s: nothing to settle for us: %s", key, exc)
            except TransactionFailed:
                continue
            owed.pop(key)
        if paid and self.fe.credits(self.ledger.address):
            self.fe.withdraw()
        return paid
