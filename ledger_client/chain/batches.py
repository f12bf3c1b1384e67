"""Batched settlement's off-chain half (docs/protocol.md R3.7–R3.13): runs of leaves signed once (EIP-712), their
Merkle nodes, batch roots and the range proofs `WorkBatches.claim`, `challenge` and `proveDuplicate` take — the same
hashing as contracts/src/WorkBatches.sol.

A leaf's hash is `keccak(abi.encode(rolloutDigest, step, samples))`; a run's `leavesRoot` is the root of its leaves'
hashes; the worker signs `Run(poolId, epoch, firstCounter, count, leavesRoot)`; a run's node in a batch is
`keccak(abi.encode(digest, r, vs))` (its signature committed in the batch). Both trees are positional, padded with
zero nodes to a power of two, inner nodes `keccak(left ‖ right)`. A batch's list (protocol.batchlist) is turned
back into its runs and checked against the posted batch here (`runs_of_list`, `check_posted`).
"""

from __future__ import annotations

from typing import NamedTuple

from typing import TYPE_CHECKING

from eth_abi import encode
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils import keccak

from ledger_client.chain.bindings import LeafBody, SignedRun, WorkBatches
from protocol.batchlist import BatchList, BatchListError, ListedLeaf, ListedRun

if TYPE_CHECKING:
    from ledger_client.chain.ledger import Ledger

SECP256K1_HALF_N = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0
RUN_TYPE = "Run(uint256 poolId,uint32 epoch,uint32 firstCounter,uint32 count,bytes32 leavesRoot)"
DOMAIN_TYPE = "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
DOMAIN_NAME, DOMAIN_VERSION = "proofswarm WorkBatches", "1"
MAX_LEAVES = 4_096
"""Most leaves a run may hold (`WorkBatches.MAX_LEAVES`)."""


class Run(NamedTuple):
    """A run the worker signed: its leaves (`IWorkBatches.LeafBody`, counters `first_counter`..), their root and the
    compact (EIP-2098) signature of its EIP-712 digest."""

    pool_id: int
    epoch: int
    first_counter: int
    worker: str
    leaves: tuple[LeafBody, ...]
    leaves_root: bytes
    digest: bytes
    r: bytes
    vs: bytes

    def signed(self) -> SignedRun:
        """`IWorkBatches.SignedRun` as the contract takes it."""
        return SignedRun(self.first_counter, len(self.leaves), self.leaves_root, self.r, self.vs)

    def node(self) -> bytes:
        """The run's node in a batch's tree."""
        return keccak(encode(["bytes32", "bytes32", "bytes32"], [self.digest, self.r, self.vs]))

    def hashes(self) -> list[bytes]:
        return [leaf_hash(leaf) for leaf in self.leaves]

    def leaf(self, counter: int) -> tuple:
        """`IWorkBatches.RunLeaf` for the leaf of `counter`: the signed run, the leaf, its proof in the run."""
        i = counter - self.first_counter
        if not 0 <= i < len(self.leaves):
            raise ValueError(f"counter {counter} is outside the run {self.first_counter}+{len(self.leaves)}")
        return (self.signed(), tuple(self.leaves[i]), range_proof(self.hashes(), i, 1))

    def claim_args(self, first: int, n: int) -> tuple[int, list[tuple], list[bytes]]:
        """`first`, the leaves and the run proof `WorkBatches.claim` takes for counters `first`..`first + n − 1`."""
        i = first - self.first_counter
        return first, [tuple(leaf) for leaf in self.leaves[i:i + n]], range_proof(self.hashes(), i, n)


def domain_separator(chain_id: int, contract: str) -> bytes:
    return keccak(encode(["bytes32", "bytes32", "bytes32", "uint256", "address"],
                         [keccak(text=DOMAIN_TYPE), keccak(text=DOMAIN_NAME), keccak(text=DOMAIN_VERSION), chain_id,
                          contract]))


def leaf_hash(leaf: LeafBody) -> bytes:
    """`WorkBatches.leafHash`: 96 bytes hashed, never an inner node's 64."""
    return keccak(encode(["bytes32", "uint64", "uint32"], list(leaf)))


def run_digest(domain: bytes, pool_id: int, epoch: int, first_counter: int, count: int, leaves_root: bytes) -> bytes:
    """The EIP-712 digest the worker signs (`WorkBatches.runDigest`)."""
    struct = keccak(encode(["bytes32", "uint256", "uint32", "uint32", "uint32", "bytes32"],
                           [keccak(text=RUN_TYPE), pool_id, epoch, first_counter, count, leaves_root]))
    return keccak(b"\x19\x01" + domain + struct)


def sign_run(account: LocalAccount, domain: bytes, pool_id: int, epoch: int, first_counter: int,
             leaves: list[LeafBody]) -> Run:
    """Sign the run of `leaves` from counter `first_counter` (1..MAX_LEAVES leaves)."""
    if not 1 <= len(leaves) <= MAX_LEAVES:
        raise ValueError(f"a run holds 1..{MAX_LEAVES} leaves, not {len(leaves)}")
    leaves = tuple(LeafBody(*leaf) for leaf in leaves)
    top = root([leaf_hash(leaf) for leaf in leaves])
    digest = run_digest(domain, pool_id, epoch, first_counter, len(leaves), top)
    sig = account.unsafe_sign_hash(digest)
    vs = sig.s | ((sig.v - 27) << 255)
    return Run(pool_id, epoch, first_counter, account.address, leaves, top, digest, sig.r.to_bytes(32, "big"),
               vs.to_bytes(32, "big"))


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
        raise ValueError("a tree holds at least one node")
    return _levels(nodes)[-1][0]


def range_proof(nodes: list[bytes], lo: int, n: int) -> list[bytes]:
    """The siblings the range `lo`..`lo + n − 1` lacks, level by level, left then right (`WorkBatches._root`'s
    order): of a run's leaves in its run, or of a run's node (n = 1) in its batch."""
    if n < 1 or lo < 0 or lo + n > len(nodes):
        raise ValueError(f"range {lo}+{n} is outside a tree of {len(nodes)} nodes")
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


def batch(runs: list[Run], list_digest: bytes) -> tuple[list[bytes], tuple]:
    """A batch of `runs` (one pool and epoch): its run nodes and `IWorkBatches.BatchRef`."""
    if not runs or len({(r.pool_id, r.epoch) for r in runs}) != 1:
        raise ValueError("a batch holds at least one run, all of one pool and epoch")
    nodes = [r.node() for r in runs]
    return nodes, (runs[0].pool_id, runs[0].epoch, len(nodes), root(nodes), list_digest)


class InconsistentList(BatchListError):
    """A batch list that does not rebuild its posted batch (a run's signature, root or the batch's root, count, pool or
    epoch): the batch is voided (R3.8)."""


def batches_of(ledger: Ledger, pool_id: int) -> WorkBatches | None:
    """The deployment's WorkBatches when the pool settles its files there (configured; R3.7–R3.13), else None."""
    wb = ledger.batches
    if wb is None or wb.genesis_of(pool_id) == 0:
        return None
    return wb


def listed(run: Run) -> ListedRun:
    """The run as a batch list carries it."""
    return ListedRun(run.worker, run.first_counter, tuple(ListedLeaf(*leaf) for leaf in run.leaves), run.r, run.vs)


def signer_of(digest: bytes, r: bytes, vs: bytes) -> str | None:
    """Who signed `digest` with the compact signature (r, vs), as `ECDSA.tryRecover` says (None: no one; a high s
    refused)."""
    word = int.from_bytes(vs, "big")
    s, v = word & ((1 << 255) - 1), 27 + (word >> 255)
    if not 0 < s <= SECP256K1_HALF_N or int.from_bytes(r, "big") == 0:
        return None
    try:
        return Account._recover_hash(digest, vrs=(v, int.from_bytes(r, "big"), s))
    except Exception:  # noqa: BLE001 - a point off the curve: no signer
        return None


def runs_of_list(bl: BatchList, domain: bytes) -> list[Run]:
    """The signed runs a decoded list holds, each rebuilt (leaves root, digest) and its signature recovered to its
    listed worker; InconsistentList otherwise."""
    runs = []
    for i, x in enumerate(bl.runs):
        leaves = tuple(LeafBody(bytes(leaf.rollout_digest), leaf.step, leaf.samples) for leaf in x.leaves)
        top = root([leaf_hash(leaf) for leaf in leaves])
        digest = run_digest(domain, bl.pool_id, bl.epoch, x.first_counter, len(leaves), top)
        if signer_of(digest, x.r, x.vs) != x.worker:
            raise InconsistentList(f"run {i} (counters {x.first_counter}+{len(leaves)}) is not signed by its listed "
                                   f"worker {x.worker}")
        runs.append(Run(bl.pool_id, bl.epoch, x.first_counter, x.worker, leaves, top, digest, x.r, x.vs))
    return runs


def check_posted(bl: BatchList, domain: bytes, ref: tuple) -> list[Run]:
    """The runs of list `bl` once they rebuild the posted batch `ref` (`IWorkBatches.BatchRef`: pool, epoch, count,
    root, list digest); InconsistentList naming the first field that differs."""
    pool_id, epoch, count, top, list_digest = ref
    if (bl.pool_id, bl.epoch) != (pool_id, epoch):
        raise InconsistentList(f"the list is of pool {bl.pool_id} epoch {bl.epoch}, the batch of pool {pool_id} "
                               f"epoch {epoch}")
    if len(bl.runs) != count:
        raise InconsistentList(f"the list holds {len(bl.runs)} runs, the batch {count}")
    runs = runs_of_list(bl, domain)
    if root([r.node() for r in runs]) != bytes(top):
        raise InconsistentList("the list's runs do not hash to the batch's root")
    return runs
