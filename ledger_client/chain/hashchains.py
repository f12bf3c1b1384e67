"""One participant's committed hash chain in a pool with forced errors (docs/protocol.md R9.25, R9.27, R9.29), as the
validator and worker daemons keep it: commit it (locking the role's bond in ForcedErrors), reveal each epoch's link
inside its reveal window, record each epoch's beacon, and give the link and the beacon the draws of any epoch it
covers use.

Its secret is derived from the participant's key (protocol.hashchain: nothing to lose with a state folder), and
everything else is the chain's own state on-chain, read at start: a restart (kill -9 included) recovers the secret,
sees which links are revealed, and never reveals one twice (the contract refuses it too).
"""

from __future__ import annotations

import logging

from ledger_client.chain.errors import BeaconPending, ContractRevert, InsufficientTokens, TransactionFailed
from ledger_client.chain.ledger import Ledger
from protocol.hashchain import Role, chain_secret, epoch_of, hashes, link, recover_secret

log = logging.getLogger("proofswarm.chain")

CHAIN_LENGTH = 256
"""Epochs a chain covers (`MAX_CHAIN_LENGTH` is 1024): its bond stays locked until the last one is settled."""
BEACON_GAS = 100_000
"""The least gas limit of a `recordBeacon`: one estimated in its anchor's block (a no-op there) records in the next."""
REVEAL_LEAD_S = 3
"""A link is not sent in the last seconds of its window: mined after it, it would revert (and when one epoch's window
closes as the next one's opens, the next is the one to reveal)."""


class CommittedChain:
    """`ledger`'s chain of `role` in pool `pool_id`; `of` gives None when the pool has no forced errors."""

    def __init__(self, ledger: Ledger, pool_id: int, role: Role, params, challenge_window: int, spare: int = 0):
        self.ledger, self.pool_id, self.role, self.params = ledger, pool_id, role, params
        self.fe = ledger.forced_errors
        self.genesis = self.fe.genesis(pool_id)
        self.challenge_window = challenge_window
        self.bond = params.validator_bond if role == Role.VALIDATOR else params.worker_bond
        self.spare = spare
        """Stake kept bonded (free) beside the chain's bond: a validator's dispute bonds."""
        self.chain = self.fe.get_chain(pool_id, role, ledger.address)
        self.secret = self._recover()
        self._beacons: dict[int, bytes] = {}
        """Each epoch's beacon once settled (recorded, or the fallback): it never changes."""

    @classmethod
    def of(cls, ledger: Ledger, pool_id: int, role: Role, spare: int = 0):
        if ledger.forced_errors is None:
            return None
        params = ledger.forced_errors.get_params(pool_id)
        if params.forced_bps == 0:
            return None
        return cls(ledger, pool_id, role, params, ledger.pool.get_pool(pool_id).params.challenge_window, spare)

    def _recover(self) -> bytes | None:
        return recover_secret(bytes(self.ledger.account.key), self.ledger.w3.eth.chain_id, self.fe.address,
                              self.pool_id, self.role, self.chain)

    def _reread(self) -> None:
        self.chain = self.fe.get_chain(self.pool_id, self.role, self.ledger.address)
        self.secret = self._recover()

    def epoch(self, t: int) -> int:
        return epoch_of(self.genesis, self.params.epoch_length, t)

    def epoch_end(self, epoch: int) -> int:
        """Chain time at which `epoch` ends (the next begins after it)."""
        return self.genesis + (epoch + 1) * self.params.epoch_length

    def reveal_window(self, epoch: int) -> tuple[int, int]:
        """`ForcedErrors.revealWindowOf`: from the epoch's end plus the challenge window, for `revealWindow`."""
        start = self.epoch_end(epoch) + self.challenge_window
        return start, start + self.params.reveal_window

    def link_at(self, t: int) -> bytes | None:
        """The link of the epoch of chain time `t`, or None when no chain of this key covers it."""
        epoch = self.epoch(t)
        if self.secret is None or not self.chain.first_epoch <= epoch <= self.chain.end_epoch:
            return None
        return link(self.secret, self.chain.end_epoch, epoch)

    def beacon(self, epoch: int) -> bytes | None:
        """The beacon the draws of `epoch` use (`ForcedErrors.beaconOf`): the recorded one, or zero once the epoch
        missed it (R9.29's fallback); None while it is pending — nothing drawn with it can be decided yet."""
        if (known := self._beacons.get(epoch)) is not None:
            return known
        try:
            value = bytes(self.fe.beacon_of(self.pool_id, epoch))
        except BeaconPending:
            return None
        self._beacons[epoch] = value
        return value

    def record_beacon(self, now: int) -> bytes | None:
        """The beacon of the epoch of chain time `now`, anchored and recorded by this key if nobody has (one cheap
        transaction a step, R9.29); None while it waits for the anchor's next block."""
        return self._record(self.epoch(now))

    def _record(self, epoch: int) -> bytes | None:
        for _ in range(2):  # anchor, then record from the next block (an automining chain has it at once)
            if (value := self.beacon(epoch)) is not None:
                return value
            try:
                self.fe.sender.send(self.fe.function("recordBeacon", self.pool_id, epoch), function="recordBeacon",
                                    min_gas=BEACON_GAS)
            except (ContractRevert, TransactionFailed) as exc:  # recorded meanwhile, or the epoch is not yet/over
                log.debug("epoch %d's beacon: %s", epoch, exc)
                break
        return self.beacon(epoch)

    def settled_after(self, t: int) -> int:
        """Chain time after which a file submitted at `t` can be `settle`d (its epoch's reveal window closed)."""
        return self.reveal_window(self.epoch(t))[1]

    def tick(self, now: int) -> list[int]:
        """Commit a chain when none is live (or the last is settled), and reveal every link whose window is open;
        returns the epochs revealed. The current epoch's beacon (and the last one's, if anchored and not recorded) is
        recorded first if nobody has. A refusal (too early for a window, not a participant yet, a race) waits for the
        next tick."""
        epoch = self.epoch(now)
        if epoch:  # an anchor of the epoch before, made late and not recorded yet, is recorded before its hash is gone
            self._record(epoch - 1)
        self._record(epoch)
        try:
            if self.secret is None or self._replaceable(now):
                self._commit(now)
            return self._reveal(now)
        except (ContractRevert, TransactionFailed) as exc:
            log.info("hash chain: %s; trying again later", exc)
            self._reread()
            return []
        except InsufficientTokens as exc:
            log.warning("hash chain: cannot lock the pool's %s bond of %d: %s; trying again later", self.role.name.lower(),
                        self.bond, exc)
            return []

    def _replaceable(self, now: int) -> bool:
        if self.chain.end_epoch == 0:
            return True
        if now <= self.reveal_window(self.chain.end_epoch)[1]:
            return False
        return now > self.fe.settled_by(self.pool_id, self.chain.end_epoch)

    def _commit(self, now: int) -> None:
        if not self._replaceable(now):
            log.warning("hash chain: the live chain on-chain for this key is not one it derived; committing none")
            return
        secret = chain_secret(bytes(self.ledger.account.key), self.ledger.w3.eth.chain_id, self.fe.address,
                              self.pool_id, self.role, self.epoch(now))
        if missing := max(0, self.bond - self.chain.locked):
            self.ledger.ensure_stake(missing + self.spare)
        self.fe.commit_chain(self.pool_id, self.role, hashes(secret, CHAIN_LENGTH), CHAIN_LENGTH)
        self._reread()
        log.info("hash chain committed for epochs %d..%d (bond %d locked)", self.chain.first_epoch,
                 self.chain.end_epoch, self.chain.locked)

    def _reveal(self, now: int) -> list[int]:
        done: list[int] = []
        if self.secret is None:
            return done
        for epoch in range(self.chain.last_epoch + 1, self.chain.end_epoch + 1):
            opens, closes = self.reveal_window(epoch)
            if now < opens:
                break
            if now > closes - REVEAL_LEAD_S:
                continue  # missed: silent for that epoch (R9.27)
            value = link(self.secret, self.chain.end_epoch, epoch)
            try:
                self.fe.reveal_link(self.pool_id, self.role, epoch, value)
            except (ContractRevert, TransactionFailed) as exc:  # mined past its window, or revealed meanwhile
                log.info("hash chain: epoch %d's link not revealed: %s", epoch, exc)
                self._reread()
                continue
            self.chain = self.chain._replace(last=value, last_epoch=epoch)
            done.append(epoch)
            log.info("hash chain: revealed epoch %d's link", epoch)
        return done
