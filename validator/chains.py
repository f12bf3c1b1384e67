"""A court validator's committed hash chain in a pool with forced errors (docs/protocol.md R9.25–R9.27).

`AuditChain` commits the chain (locking the pool's `validatorBond` in ForcedErrors), reveals each epoch's link inside
its reveal window, and draws this validator's audits from it: file `w` of epoch e iff `keccak(σ_e ‖ w) <
auditBps/10000`, the rule `ForcedErrors.isAudited` checks on-chain after the reveal. Its secret is derived from the
validator's key (protocol.hashchain: nothing to lose with the state folder), and everything else it needs is the
chain's own state on-chain, read at start: a restart (kill -9 included) recovers the secret, sees which links are
revealed, and never reveals one twice (the contract refuses it too).
"""

from __future__ import annotations

import logging

from ledger_client.chain.errors import ContractRevert, TransactionFailed
from ledger_client.chain.ledger import Ledger
from protocol.hashchain import Role, chain_secret, drawn, epoch_of, hashes, link, recover_secret
from protocol.pool import CaseState

log = logging.getLogger("proofswarm.validator")

CHAIN_LENGTH = 256
"""Epochs a chain covers (`MAX_CHAIN_LENGTH` is 1024): its bond stays locked until the last one is settled."""


class AuditChain:
    """This validator's chain in one pool: None from `of` when the pool has no forced errors."""

    def __init__(self, ledger: Ledger, pool_id: int, params, challenge_window: int, spare: int = 0):
        self.ledger, self.pool_id, self.params = ledger, pool_id, params
        self.fe = ledger.forced_errors
        self.genesis = self.fe.genesis(pool_id)
        self.challenge_window = challenge_window
        self.spare = spare
        """Stake kept bonded beside the chain's bond (the court's dispute bonds)."""
        self.chain = self.fe.get_chain(pool_id, Role.VALIDATOR, ledger.address)
        self.secret = self._recover()

    @classmethod
    def of(cls, ledger: Ledger, pool_id: int, spare: int = 0) -> AuditChain | None:
        if ledger.forced_errors is None:
            return None
        params = ledger.forced_errors.get_params(pool_id)
        if params.forced_bps == 0:
            return None
        return cls(ledger, pool_id, params, ledger.pool.get_pool(pool_id).params.challenge_window, spare)

    def _recover(self) -> bytes | None:
        w3, fe = self.ledger.w3, self.fe
        return recover_secret(bytes(self.ledger.account.key), w3.eth.chain_id, fe.address, self.pool_id,
                              Role.VALIDATOR, self.chain)

    def epoch(self, t: int) -> int:
        return epoch_of(self.genesis, self.params.epoch_length, t)

    def reveal_window(self, epoch: int) -> tuple[int, int]:
        """`ForcedErrors.revealWindowOf`: from the epoch's end plus the challenge window, for `revealWindow`."""
        start = self.genesis + (epoch + 1) * self.params.epoch_length + self.challenge_window
        return start, start + self.params.reveal_window

    def covers(self, epoch: int) -> bool:
        return self.secret is not None and self.chain.first_epoch <= epoch <= self.chain.end_epoch

    # ------------------------------------------------------------------ draws

    def audits(self, work_id: bytes, submitted_at: int) -> bool | None:
        """Whether this validator is drawn to audit `work_id` (submitted at chain time `submitted_at`); None when no
        chain of its covers the file's epoch (then it is not chargeable for it: `chargeAuditor`)."""
        epoch = self.epoch(submitted_at)
        if not self.covers(epoch):
            return None
        return drawn(link(self.secret, self.chain.end_epoch, epoch), work_id, self.params.audit_bps)

    # ------------------------------------------------------------------ commit and reveal

    def tick(self, now: int) -> None:
        """Commit a chain when none is live (or the last is settled), and reveal every link whose window is open."""
        try:
            if self.secret is None or self._replaceable(now):
                self._commit(now)
            self._reveal(now)
        except (ContractRevert, TransactionFailed) as exc:  # too early for the window, or a race: next poll
            log.info("hash chain: %s; trying again at the next poll", exc)
            self.chain = self.fe.get_chain(self.pool_id, Role.VALIDATOR, self.ledger.address)
            self.secret = self._recover()

    def _replaceable(self, now: int) -> bool:
        if now <= self.reveal_window(self.chain.end_epoch)[1]:
            return False
        return now > self.fe.settled_by(self.pool_id, self.chain.end_epoch)

    def _commit(self, now: int) -> None:
        if self.chain.end_epoch and self.secret is None:
            log.warning("hash chain: the chain on-chain for this key is not one it derived; committing none over it")
        if self.chain.end_epoch and not self._replaceable(now):
            return
        label = self.epoch(now)
        secret = chain_secret(bytes(self.ledger.account.key), self.ledger.w3.eth.chain_id, self.fe.address,
                              self.pool_id, Role.VALIDATOR, label)
        missing = max(0, self.params.validator_bond - self.chain.locked)
        if missing:
            self.ledger.ensure_stake(missing + self.spare)
        self.fe.commit_chain(self.pool_id, Role.VALIDATOR, hashes(secret, CHAIN_LENGTH), CHAIN_LENGTH)
        self.chain = self.fe.get_chain(self.pool_id, Role.VALIDATOR, self.ledger.address)
        self.secret = self._recover()
        log.info("hash chain committed for epochs %d..%d (bond %d locked)", self.chain.first_epoch,
                 self.chain.end_epoch, self.chain.locked)

    def _reveal(self, now: int) -> list[int]:
        """Reveal each unrevealed epoch whose window is open now; returns the epochs revealed."""
        done = []
        if self.secret is None:
            return done
        for epoch in range(self.chain.last_epoch + 1, self.chain.end_epoch + 1):
            opens, closes = self.reveal_window(epoch)
            if now < opens:
                break
            if now > closes:
                continue  # missed: silent for that epoch (R9.27)
            value = link(self.secret, self.chain.end_epoch, epoch)
            self.fe.reveal_link(self.pool_id, Role.VALIDATOR, epoch, value)
            self.chain = self.chain._replace(last=value, last_epoch=epoch)
            done.append(epoch)
            log.info("hash chain: revealed epoch %d's link", epoch)
        return done

    def settled_after(self, submitted_at: int) -> int:
        """Chain time after which a file submitted at `submitted_at` can be `settle`d (its epoch's window closed)."""
        return self.reveal_window(self.epoch(submitted_at))[1]

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
