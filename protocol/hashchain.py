"""Committed hash chains (docs/protocol.md R9.25; decision 0009 §1): a holder's links, its draws, and the secret a
daemon derives from its own key, so that a restart — or a new machine with the same key — reveals the same links.

A chain from secret `s` ending at epoch `end` has link `keccak^(end − e)(s)` for epoch e; its head (committed) is
`keccak^length(s)`. A validator audits file `w` of epoch e iff `keccak(σ_e ‖ β_e ‖ w) < auditBps/10000` of 2^256 (β_e:
the epoch's beacon, a block hash fixed after every chain covering the epoch was committed: R9.29), a worker owes a
forced error in it iff the same holds for its own link at `forcedBps` (`ForcedErrors.drawn`).

Why derived, not journaled: a secret written to a state folder is lost with it (a disk, a move to a new machine), and a
lost secret costs every epoch's link — `silencePenalty` an epoch for a validator, S + R a file for a worker (R9.27);
the key is what an operator keeps anyway. The label that makes each chain's secret fresh (a reused secret publishes a
longer chain's links as the old one's head) is the epoch in which the holder decided to commit it: one chain can
replace another only epochs after the last one's end (`settledBy`), so no two chains share it; the chain's on-chain
state (`getChain`) tells which label was used (`recover_secret`).
"""

from __future__ import annotations

import hashlib
import hmac
from enum import IntEnum

from eth_abi import encode
from eth_utils import keccak

BPS = 10_000
RECOVER_EPOCHS = 16
"""How many epochs before a chain's first one `recover_secret` tries as its label: the commit was decided in the
epoch before its first, or a few earlier if its transaction waited."""


class Role(IntEnum):
    """Mirror of `IForcedErrors.Role`."""

    VALIDATOR = 0
    WORKER = 1


def chain_secret(private_key: bytes, chain_id: int, contract: str, pool_id: int, role: Role, label: int) -> bytes:
    """The secret of the chain this key commits for (chain, contract, pool, role) in epoch `label`."""
    message = encode(["string", "uint256", "address", "uint256", "uint8", "uint256"],
                     ["proofswarm hash chain v1", chain_id, contract, pool_id, int(role), label])
    return hmac.new(bytes(private_key), message, hashlib.sha256).digest()


def hashes(value: bytes, n: int) -> bytes:
    """`keccak` applied `n` times (keccak256(abi.encode(bytes32)) is keccak of the 32 bytes)."""
    for _ in range(n):
        value = keccak(value)
    return value


def link(secret: bytes, end_epoch: int, epoch: int) -> bytes:
    """Epoch `epoch`'s link of the chain from `secret` ending at `end_epoch`."""
    if epoch > end_epoch:
        raise ValueError(f"epoch {epoch} is past the chain's last epoch {end_epoch}")
    return hashes(secret, end_epoch - epoch)


def drawn(link_: bytes, beacon: bytes, work_id: bytes, bps: int) -> bool:
    """`ForcedErrors.drawn`: keccak(abi.encode(link, beacon, workId)) < (2^256 − 1) // 10000 × bps."""
    value = keccak(bytes(link_) + bytes(beacon) + bytes(work_id))
    return int.from_bytes(value, "big") < ((2**256 - 1) // BPS) * bps


def epoch_of(genesis: int, epoch_length: int, t: int) -> int:
    """`ForcedErrors.epochOf`: the epoch of chain time `t` (0 up to the pool's `configure`)."""
    return 0 if t <= genesis else (t - genesis) // epoch_length


def recover_secret(private_key: bytes, chain_id: int, contract: str, pool_id: int, role: Role, chain) -> bytes | None:
    """The secret behind the on-chain `chain` (`ForcedErrors.getChain`) if this key made it: its last revealed link
    (the head before any reveal) is `keccak^(end − lastEpoch)(s)`. None if no label near its first epoch fits."""
    if chain.end_epoch == 0:
        return None
    for label in range(chain.first_epoch - 1, max(-1, chain.first_epoch - 1 - RECOVER_EPOCHS), -1):
        secret = chain_secret(private_key, chain_id, contract, pool_id, role, label)
        if link(secret, chain.end_epoch, chain.last_epoch) == bytes(chain.last):
            return secret
    return None
