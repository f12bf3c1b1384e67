"""What binds a rollout file to one on-chain submission: (chain id, pool contract, pool id, worker,
step, nonce) — carried in the file's header and equal to the `submitWork` record — the hash of the block
that pinned the nonce's step (its `WorkSubmitted.seedBlock`; it seeds the file's sampling), and the work id
the contract derives from the binding (`ComputePool.workIdOf`). A batched leaf's file is bound alike, to WorkBatches
with its epoch and counter (`leaf_binding`, docs/protocol.md R3.9)."""

from __future__ import annotations

from eth_abi import encode
from eth_utils import keccak, to_checksum_address
from pydantic import BaseModel, ConfigDict, Field, field_validator

from protocol.digest import Digest

ADDRESS_PATTERN = r"^0x[0-9a-fA-F]{40}$"
LOCAL_CONTRACT = "0x" + "00" * 20
"""The pool contract named by files of local mode (no chain)."""


class SubmissionBinding(BaseModel):
    """One submission's identity: `nonce` is the worker's `nonce`-th submission in the pool."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    chain_id: int = Field(ge=0)
    pool_contract: str = Field(pattern=ADDRESS_PATTERN)
    pool_id: int = Field(ge=0)
    worker: str = Field(pattern=ADDRESS_PATTERN)
    step: int = Field(ge=0, lt=2**64)
    nonce: int = Field(ge=0, lt=2**64)
    seed_block_hash: Digest = Field(default=Digest(bytes(32)), description=(
        "hash of the block that pinned this nonce's step (ComputePool's pin rule); zero in local mode"))

    @field_validator("pool_contract", "worker")
    @classmethod
    def _checksummed(cls, value: str) -> str:
        return to_checksum_address(value)

    @property
    def work_id(self) -> bytes:
        return work_id_of(self.chain_id, self.pool_contract, self.pool_id, self.worker, self.nonce)


def work_id_of(chain_id: int, pool_contract: str, pool_id: int, worker: str, nonce: int) -> bytes:
    """`keccak256(abi.encode(chainid, contract, poolId, worker, nonce))`, as `ComputePool.workIdOf`."""
    return keccak(encode(["uint256", "address", "uint256", "address", "uint64"],
                         [chain_id, to_checksum_address(pool_contract), pool_id, to_checksum_address(worker), nonce]))


def local_binding(worker: str, step: int, nonce: int) -> SubmissionBinding:
    """The binding of a local-mode file (no chain: chain id 0, the zero contract, pool 0)."""
    return SubmissionBinding(chain_id=0, pool_contract=LOCAL_CONTRACT, pool_id=0, worker=worker, step=step, nonce=nonce)


def leaf_nonce(epoch: int, counter: int) -> int:
    """A batched leaf's nonce in its file's binding (docs/protocol.md R3.9): `epoch << 32 | counter`, unique over a
    worker's epochs, so its prompts (a PRF of the nonce) are never assigned twice."""
    if not (0 <= epoch < 2**32 and 0 <= counter < 2**32):
        raise ValueError(f"epoch {epoch} and counter {counter} are 32-bit")
    return epoch << 32 | counter


def leaf_binding(chain_id: int, work_batches: str, pool_id: int, worker: str, step: int, epoch: int, counter: int,
                 beacon: bytes) -> SubmissionBinding:
    """The binding of a batched leaf's file (R3.9): the WorkBatches contract in place of the ComputePool (a file made
    for `submitWork` is never a leaf, nor the reverse), the nonce `leaf_nonce(epoch, counter)`, seeded by the epoch's
    beacon in place of a pin's block hash."""
    return SubmissionBinding(chain_id=chain_id, pool_contract=work_batches, pool_id=pool_id, worker=worker, step=step,
                             nonce=leaf_nonce(epoch, counter), seed_block_hash=Digest(bytes(beacon)))
