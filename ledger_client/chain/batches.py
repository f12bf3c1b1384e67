"""Batched settlement's off-chain half (docs/protocol.md R3.7–R3.13): EIP-712 leaves, their Merkle nodes, batch
roots and the range proofs `WorkBatches.claim` and `challenge` take — the same hashing as contracts/src/WorkBatches.sol.

A leaf's node is `keccak(abi.encode(digest, r, vs))` (its signature committed in the batch); the tree is positional,
padded with zero nodes to a power of two, inner nodes `keccak(left ‖ right)`.
"""

from __future__ import annotations

from typing import NamedTuple

from eth_abi import encode
from eth_account.signers.local import LocalAccount
from eth_utils import keccak

LEAF_TYPE = "Leaf(uint256 poolId,uint32 epoch,uint32 counter,address worker,bytes32 rolloutDigest,uint64 step,uint32 samples)"
DOMAIN_TYPE = "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
DOMAIN_NAME, DOMAIN_VERSION = "proofswarm WorkBatches", "1"


class Leaf(NamedTuple):
    """A signed leaf: the fields the worker signs and its compact (EIP-2098) signature."""

    pool_id: int
    epoch: int
    counter: int
    worker: str
    rollout_digest: bytes
    step: int
    samples: int
    r: bytes
    vs: bytes

    def body(self) -> tuple:
        """`IWorkBatches.LeafBody` as the contract takes it."""
        return (self.rollout_digest, self.step, self.samples, self.r, self.vs)


def domain_separator(chain_id: int, contract: str) -> bytes:
    return keccak(encode(["bytes32", "bytes32", "bytes32", "uint256", "address"],
                         [keccak(text=DOMAIN_TYPE), keccak(text=DOMAIN_NAME), keccak(text=DOMAIN_VERSION), chain_id,
                          contract]))


def leaf_digest(domain: bytes, pool_id: int, epoch: int, counter: int, worker: str, rollout_digest: bytes, step: int,
                samples: int) -> bytes:
    """The EIP-712 digest the worker signs (`WorkBatches.leafDigest`)."""
    struct = keccak(encode(["bytes32", "uint256", "uint32", "uint32", "address", "bytes32", "uint64", "uint32"],
                           [keccak(text=LEAF_TYPE), pool_id, epoch, counter, worker, rollout_digest, step, samples]))
    return keccak(b"\x19\x01" + domain + struct)


def sign_leaf(account: LocalAccount, domain: bytes, pool_id: int, epoch: int, counter: int, rollout_digest: bytes,
              step: int, samples: int) -> Leaf:
    digest = leaf_digest(domain, pool_id, epoch, counter, account.address, rollout_digest, step, samples)
    sig = account.unsafe_sign_hash(digest)
    vs = sig.s | ((sig.v - 27) << 255)
    return Leaf(pool_id, epoch, counter, account.address, rollout_digest, step, samples, sig.r.to_bytes(32, "big"),
                vs.to_bytes(32, "big"))


def node(domain: bytes, leaf: Leaf) -> bytes:
    digest = leaf_digest(domain, leaf.pool_id, leaf.epoch, leaf.counter, leaf.worker, leaf.rollout_digest, leaf.step,
                         leaf.samples)
    return keccak(encode(["bytes32", "bytes32", "bytes32"], [digest, leaf.r, leaf.vs]))


def _levels(nodes: list[bytes]) -> list[list[bytes]]:
    size = 1
    while size < len(nodes):
        size <<= 1
    level = list(nodes) + [b"\x00" * 32] * (size - len(nodes))
    levels = [level]
    while len(level) > 1:
        level = [keccak(level[i] + level[i + 1]) for i in range(0, len(level), 2)]
        levels.append(level)
    return levels


def root(nodes: list[bytes]) -> bytes:
    if not nodes:
        raise ValueError("a batch holds at least one leaf")
    return _levels(nodes)[-1][0]


def range_proof(nodes: list[bytes], lo: int, n: int) -> list[bytes]:
    """The siblings the run `lo`..`lo + n − 1` lacks, level by level, left then right (`WorkBatches._root`'s order)."""
    if n < 1 or lo < 0 or lo + n > len(nodes):
        raise ValueError(f"run {lo}+{n} is outside a batch of {len(nodes)} leaves")
    proof = []
    for level in _levels(nodes)[:-1]:
        hi = lo + n
        if lo & 1:
            proof.append(level[lo - 1])
        if hi & 1:
            proof.append(level[hi])
        new_lo = lo >> 1
        n = (hi + 1) // 2 - new_lo
        lo = new_lo
    return proof


def verify_range(run: list[bytes], lo: int, count: int, proof: list[bytes], expected_root: bytes) -> bool:
    """What `WorkBatches._root` computes, in Python: whether `run` at `lo` with `proof` hashes to `expected_root`."""
    nodes, n, p, width = list(run), len(run), 0, 1
    if n < 1 or lo + n > count:
        return False
    while width < count:
        left = lo & 1
        right = (lo + n) & 1
        if p + left + right > len(proof):
            return False
        ext = ([proof[p]] if left else []) + nodes[:n]
        p += left
        if right:
            ext.append(proof[p])
            p += 1
        nodes = [keccak(ext[i] + ext[i + 1]) for i in range(0, len(ext), 2)]
        n, lo, width = len(nodes), lo >> 1, width << 1
    return n == 1 and p == len(proof) and nodes[0] == expected_root
