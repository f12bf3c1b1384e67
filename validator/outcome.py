"""What flows through a validator: a submission to check and why (`Purpose`), a check's outcome, the evidence
document a challenge carries, and the journal of verdicts sent.

`validator.checks` (inside the checker processes), the daemon, the court flow and the retry book all speak these
types; none of them imports the daemon.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from ledger_client.ipfs.content import MAX_OBJECT_BYTES, put_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import hex_text
from protocol.verdicts import Evidence, Reason, SpotCheck, clip_text

log = logging.getLogger("proofswarm.validator")


class Purpose(Enum):
    """Why a file is checked."""

    JUDGE = "judge"
    """The first verdict."""
    VOTE = "vote"
    """A dispute this validator's committee decides (court pools)."""
    AUDIT = "audit"
    """Another validator's verdict, re-checked (court pools)."""
    PRECHECK = "precheck"
    """An audit checked before the verdict it audits exists, so that the dispute or concurrence follows the
    verdict at once (court pools)."""

    @property
    def check_order(self) -> int:
        """The order a poll's checks run in: deadlines first (a first verdict's assigned window, a vote's commit
        period, an audit's dispute window); prechecks, which only hasten an audit, last — under a backlog they wait,
        and once the verdict is out its audit replaces them."""
        return _CHECK_ORDER.index(self)


_CHECK_ORDER = [Purpose.JUDGE, Purpose.VOTE, Purpose.AUDIT, Purpose.PRECHECK]


@dataclass(frozen=True)
class Submission:
    """A `WorkSubmitted` event, as the validator needs it: judged by `work_id`, fetched by `rollout_digest`."""

    work_id: bytes
    pool_id: int
    worker: str
    step: int
    n_samples: int
    nonce: int
    rollout_digest: bytes
    submitted_at: int = 0
    block_number: int = 0
    """Block of the `WorkSubmitted` event as first seen (0: unknown)."""
    block_hash: bytes | None = None
    """That block's hash, as first seen (None: unknown): the spot check's block B + 1 is its child while no reorg
    moved the event, which saves looking the event up again."""
    spot_block: int | None = None
    """B, the block of the `WorkSubmitted` event the spot check is seeded from (set before the check)."""
    spot_block_hash: bytes | None = None
    """Hash of block B + 1 (set before the check when the pool spot-checks)."""
    seed_block: int = 0
    """The block that pinned the submission's step (`WorkSubmitted.seedBlock`): its hash seeds the file's sampling."""
    purpose: Purpose = Purpose.JUDGE
    contract: str | None = None
    """The contract the file is bound to (R3.4): None for the ComputePool; WorkBatches for a batched leaf."""
    seed_hash: bytes | None = None
    """A batched leaf's seed hash, its epoch's beacon (R3.9); None: the hash of `seed_block`."""
    batch_id: bytes | None = None
    """The posted batch a batched leaf is in (validator.batch_flow; None: a `submitWork` submission)."""

    @property
    def key(self) -> str:
        """Its key in the retry book and the checker pool (one per work id and purpose)."""
        return self.work_id.hex() if self.purpose is Purpose.JUDGE else f"{self.purpose.value}:{self.work_id.hex()}"

    @classmethod
    def of_event(cls, e: Any) -> Submission:
        """From a decoded `WorkSubmitted` event."""
        return cls(bytes(e.work_id), e.pool_id, e.worker, e.step, e.n_samples, e.nonce, bytes(e.rollout_digest),
                   block_number=e.meta.block_number, block_hash=bytes(e.meta.block_hash), seed_block=e.seed_block)

    @classmethod
    def of_log(cls, event: Any, purpose: Purpose) -> Submission:
        """From a raw `WorkSubmitted` log (web3's AttributeDict, as `ledger_client.chain.queries.submitted_event`
        returns it)."""
        a = event["args"]
        return cls(bytes(a["workId"]), a["poolId"], a["worker"], a["step"], a["nSamples"], a["nonce"],
                   bytes(a["rolloutDigest"]), block_number=event["blockNumber"], block_hash=bytes(event["blockHash"]),
                   purpose=purpose, seed_block=a["seedBlock"])

    def to_record(self) -> dict:
        """The retry book's JSON form (what a restart needs to check the file again)."""
        return {"work_id": self.work_id.hex(), "pool_id": self.pool_id, "worker": self.worker, "step": self.step,
                "n_samples": self.n_samples, "nonce": self.nonce, "rollout_digest": self.rollout_digest.hex(),
                "block_number": self.block_number, "purpose": self.purpose.value, "seed_block": self.seed_block,
                "block_hash": self.block_hash.hex() if self.block_hash else None} | \
            ({"contract": self.contract, "seed_hash": self.seed_hash.hex(), "batch_id": self.batch_id.hex()}
             if self.batch_id is not None else {})

    @classmethod
    def from_record(cls, d: dict) -> Submission:
        return cls(bytes.fromhex(d["work_id"]), d["pool_id"], d["worker"], d["step"], d["n_samples"], d["nonce"],
                   bytes.fromhex(d["rollout_digest"]), block_number=d.get("block_number", 0),
                   purpose=Purpose(d.get("purpose", "judge")), seed_block=d.get("seed_block", 0),
                   block_hash=bytes.fromhex(d["block_hash"]) if d.get("block_hash") else None,
                   contract=d.get("contract"), seed_hash=bytes.fromhex(d["seed_hash"]) if d.get("seed_hash") else None,
                   batch_id=bytes.fromhex(d["batch_id"]) if d.get("batch_id") else None)


@dataclass
class CheckOutcome:
    """The result of checking one rollout file."""

    ok: bool
    reason: Reason | None = None
    message: str = ""
    failing_samples: list[int] = field(default_factory=list)
    failing_chunks: dict[str, list[int]] = field(default_factory=dict)
    statistics: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    spot_check: dict[str, Any] | None = None
    """protocol.verdicts.SpotCheck fields, when the completion checks ran."""
    tokens: int = 0
    """Completion tokens in the file."""
    checked_tokens: int = 0
    """Completion tokens that got the expensive checks."""
    margins: dict[str, Any] = field(default_factory=dict)
    """The checked tokens' margin statistics for the per-worker test (validator.worker_margins): "tokens",
    "score", the pool's "null" (proofs.margins.MarginNull fields) and "worker_false_positive_rate"."""
    seconds: float = 0.0
    no_verdict: bool = False
    """Nobody can judge the file, and not by its worker's fault: its step's policy is one exact mode cannot run (the
    trainer's, docs/protocol.md R5.8). `ok` is False, `reason` None, `message` says why; no verdict is sent."""


class Checker(Protocol):
    """Checks one rollout file (runs inside a worker process)."""

    def check(self, submission: Submission, data: bytes) -> CheckOutcome: ...


def evidence_document(s: Submission, outcome: CheckOutcome, validator: str) -> bytes:
    """The evidence document of a failed check (protocol.verdicts.Evidence), shed of its statistics if even bounded
    they would not fit one IPFS object."""
    evidence = Evidence(
        work_id=hex_text(s.work_id), pool_id=s.pool_id, worker=s.worker, reason=outcome.reason.name,
        reason_code=int(outcome.reason), message=outcome.message, failing_samples=outcome.failing_samples,
        failing_chunks=outcome.failing_chunks, statistics=outcome.statistics,
        thresholds=outcome.thresholds, validator=validator,
        spot_check=SpotCheck(**outcome.spot_check) if outcome.spot_check else None,
    )
    data = evidence.model_dump_json().encode()
    if len(data) > MAX_OBJECT_BYTES:
        data = evidence.model_copy(update={"statistics": {"omitted": "too large"}, "failing_chunks": {},
                                           "failing_samples": evidence.failing_samples[:64]}).model_dump_json().encode()
    return data


def publish_evidence(kubo: KuboClient, s: Submission, outcome: CheckOutcome, validator: str) -> bytes:
    """Put the evidence of a failed check on IPFS; its digest goes with the challenge or the dispute."""
    return put_object(kubo, evidence_document(s, outcome, validator))


class VerdictJournal:
    """`<state_dir>/verdicts.jsonl`: one line per verdict this validator sent."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def write(self, s: Submission, verdict: str, reason: str, message: str) -> None:
        with open(self.path, "a") as journal:
            journal.write(json.dumps({"work_id": hex_text(s.work_id), "worker": s.worker, "verdict": verdict,
                                      "reason": reason, "message": clip_text(message)}) + "\n")
        log.info("work 0x%s from %s: %s (%s)", s.work_id.hex(), s.worker, verdict, reason)
