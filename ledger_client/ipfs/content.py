"""Small content-addressed objects whose digest goes on-chain (rollout files, evidence, manifests).

By the convention of `protocol.digest`, such an object is one raw IPFS block, so its on-chain
digest is simply sha256(bytes): anyone can check a file against the chain without IPFS, and the
CID is rebuilt exactly from the digest. Objects larger than one block are refused.
"""

from __future__ import annotations

import hashlib

from ledger_client.ipfs.kubo import KuboClient, KuboError, KuboNotFound, KuboTimeout
from protocol.digest import RAW, Digest, cid_codec, cid_to_digest, digest_to_cid
from protocol.phases import phase
from protocol.runspec import RunSpec, register_task_subset

MAX_OBJECT_BYTES = 1024 * 1024
"""One raw block (Kubo's chunker limit for a single-block raw leaf)."""


class ContentError(KuboError):
    """An on-chain object could not be stored or fetched as it should."""


class ContentUnavailable(ContentError):
    """Nobody served the object within the timeout."""


class ContentMismatch(ContentError):
    """The bytes served do not hash to the on-chain digest."""


class ContentTooLarge(ContentError):
    """The object exceeds one raw block."""


def put_object(kubo: KuboClient, data: bytes) -> bytes:
    """Add `data` to Kubo (pinned) as one raw block; returns the 32-byte digest to put on-chain."""
    if len(data) > MAX_OBJECT_BYTES:
        raise ContentTooLarge(f"object of {len(data)} bytes exceeds the {MAX_OBJECT_BYTES}-byte single-block limit")
    with phase("upload"):
        cid = kubo.add_bytes(data)
    if cid_codec(cid) != RAW:
        raise ContentError(f"Kubo stored the object as {cid}, not as one raw block")
    digest = cid_to_digest(cid)
    if digest != hashlib.sha256(data).digest():
        raise ContentMismatch(f"Kubo returned {cid}, which is not sha256 of the data")
    return digest


def get_object(kubo: KuboClient, digest: bytes, timeout: float = 30.0) -> bytes:
    """Fetch the object with this on-chain digest and check its hash."""
    cid = digest_to_cid(digest, RAW)
    try:
        with phase("fetch"):
            data = kubo.cat(cid, timeout=timeout)
    except (KuboNotFound, KuboTimeout):
        raise ContentUnavailable(f"{cid}: not available within {timeout:.0f}s") from None
    if hashlib.sha256(data).digest() != digest:
        raise ContentMismatch(f"{cid}: served bytes do not match the digest")
    return data


def publish_run_spec(kubo: KuboClient, spec: RunSpec) -> bytes:
    """Store the spec on IPFS; returns the digest to use as the pool's taskRef."""
    return put_object(kubo, spec.model_dump_json().encode())


def fetch_run_spec(kubo: KuboClient, task_ref: bytes, timeout: float = 30.0) -> RunSpec:
    """The spec whose digest is the pool's taskRef, ready to build its task: the difficulty subset its task names, if
    any, is fetched too and made known to this process (`protocol.runspec.register_task_subset`), so that worker,
    validator and trainer build the same task (`protocol.runspec.usable_task`)."""
    spec = RunSpec.model_validate_json(get_object(kubo, task_ref, timeout=timeout))
    if spec.task.subset:
        register_task_subset(get_object(kubo, Digest.parse(spec.task.subset), timeout=timeout))
    return spec
