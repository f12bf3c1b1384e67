"""A court validator's committed hash chain in a pool with forced errors (docs/protocol.md R9.25–R9.27).

`AuditChain` is the validator's `CommittedChain` (ledger_client.chain.hashchains: committed with the pool's
`validatorBond`, a link revealed each epoch inside its window, the secret derived from the key so that a restart —
kill -9 included — goes on from the chain's on-chain state and never reveals twice). It draws this validator's
audits from the chain — file `w` of epoch e iff `keccak(σ_e ‖ β_e ‖ w) < auditBps/10000` (β_e: the epoch's beacon,
R9.29), the rule `ForcedErrors.isAudited` checks on-chain after the reveal. What it settles, charges and reports once
an epoch's window has closed: validator.keeper.
"""

from __future__ import annotations

from ledger_client.chain.hashchains import CommittedChain
from ledger_client.chain.ledger import Ledger
from protocol.hashchain import Role, drawn


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

