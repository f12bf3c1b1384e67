"""Weight updates as sparse patches: a policy as the parent's tensors plus the elements that changed.

An RL step moves few bf16 values (most updates fall below bf16's resolution), so the patch is
small. For every stored tensor the patch holds either the positions whose bits changed (as gaps
between successive positions, uint32) and their new bit patterns, or — when that would not be
smaller, or the parent lacks a same-shaped tensor — the whole tensor. Gaps and values are byte-
shuffled (all first bytes, then all second bytes, ...) and the whole patch is zstd-compressed.

    file = b"PSDELTA1" | u64 uncompressed length | zstd( u32 header length | header JSON | payload )

Comparison is on bit patterns, never on float values, so the rebuilt tensors are the new tensors
bit for bit (NaN payloads and -0.0 included); the fetcher still checks the rebuilt shards against
the manifest's sha256 before using them.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Final

import numpy as np
import pyarrow
import torch

from protocol.manifest import CheckpointError

MAGIC: Final = b"PSDELTA1"
ZSTD_LEVEL: Final = 3
_INT_OF_SIZE: Final = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class InvalidDelta(CheckpointError):
    """A patch is corrupt, or does not fit the parent it is applied to."""


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's elements as same-width integers (a view: no copy for contiguous tensors)."""
    return tensor.detach().cpu().contiguous().reshape(-1).view(_INT_OF_SIZE[tensor.element_size()])


def _shuffle(array: np.ndarray) -> bytes:
    width = array.dtype.itemsize
    return array.view(np.uint8).reshape(-1, width).T.tobytes()


def _unshuffle(data: bytes, dtype: np.dtype, count: int) -> np.ndarray:
    width = np.dtype(dtype).itemsize
    return np.frombuffer(data, dtype=np.uint8).reshape(width, count).T.copy().view(dtype).reshape(-1)


def _numpy_int(tensor_dtype: torch.dtype) -> np.dtype:
    return np.dtype(f"<i{torch.empty((), dtype=tensor_dtype).element_size()}") \
        if tensor_dtype != torch.uint8 else np.dtype(np.uint8)


def _changed(old: torch.Tensor | None, tensor: torch.Tensor) -> torch.Tensor | None:
    """Positions whose bits differ from the parent's tensor; None when the tensor cannot go sparse (no same-dtype,
    same-shape parent, an element width without an integer view, or too many elements for u32 gaps)."""
    if (old is None or old.dtype != tensor.dtype or old.shape != tensor.shape
            or tensor.element_size() not in _INT_OF_SIZE or tensor.numel() >= 2**32):
        return None
    return (_bits(tensor) != _bits(old)).nonzero().flatten()


def _sparse_bytes(changed: torch.Tensor, tensor: torch.Tensor) -> int:
    """A sparse entry's size before compression: a u32 gap and the new bits per changed position."""
    return changed.numel() * (4 + tensor.element_size())


def encode_delta(parent: Mapping[str, torch.Tensor], tensors: Mapping[str, torch.Tensor],
                 max_fraction: float | None = None) -> bytes | None:
    """The patch that turns `parent` into `tensors` (every name of `tensors`, in order). With `max_fraction`, None
    as soon as the patch before compression would be more than that fraction of the tensors' bytes: one pass over
    the bits decides and encodes, and a policy that moved most values stops early."""
    header: list[dict] = []
    payload: list[bytes] = []
    budget = None if max_fraction is None else max_fraction * sum(t.numel() * t.element_size() for t in tensors.values())
    size = 0
    for name, tensor in tensors.items():
        entry = {"name": name, "dtype": str(tensor.dtype).removeprefix("torch."), "shape": list(tensor.shape)}
        new_bits = _bits(tensor)
        full = new_bits.numpy().tobytes()
        changed = _changed(parent.get(name), tensor)
        if changed is not None and _sparse_bytes(changed, tensor) < len(full):
            gaps = torch.diff(changed, prepend=torch.tensor([0])).numpy().astype("<u4")
            values = new_bits[changed].numpy()
            size += _sparse_bytes(changed, tensor)
            payload += [_shuffle(gaps), _shuffle(values)]
            header.append({**entry, "kind": "sparse", "count": int(changed.numel())})
        else:
            size += len(full)
            payload.append(full)
            header.append({**entry, "kind": "full"})
        if budget is not None and size > budget:
            return None
    head = json.dumps(header, separators=(",", ":")).encode()
    raw = struct.pack("<I", len(head)) + head + b"".join(payload)
    compressed = pyarrow.Codec("zstd", compression_level=ZSTD_LEVEL).compress(raw, asbytes=True)
    return MAGIC + struct.pack("<Q", len(raw)) + compressed


def apply_delta(data: bytes, parent: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors the patch `data` describes, rebuilt from `parent`; raises InvalidDelta."""
    if data[: len(MAGIC)] != MAGIC or len(data) < len(MAGIC) + 8:
        raise InvalidDelta("not a proofswarm delta (bad magic)")
    (raw_len,) = struct.unpack("<Q", data[len(MAGIC) : len(MAGIC) + 8])
    try:
        raw = pyarrow.decompress(data[len(MAGIC) + 8 :], decompressed_size=raw_len, codec="zstd", asbytes=True)
        (head_len,) = struct.unpack("<I", raw[:4])
        header = json.loads(raw[4 : 4 + head_len])
    except (pyarrow.ArrowException, OSError, struct.error, ValueError, UnicodeDecodeError) as exc:  # pyarrow: OSError
        raise InvalidDelta(f"delta does not decompress: {exc}") from None
    at = 4 + head_len
    out: dict[str, torch.Tensor] = {}
    try:
        for entry in header:
            dtype = getattr(torch, entry["dtype"])
            shape = tuple(entry["shape"])
            numel = int(np.prod(shape, dtype=np.int64))
            size = torch.empty((), dtype=dtype).element_size()
            if entry["kind"] == "full":
                chunk = raw[at : at + numel * size]
                at += numel * size
                if len(chunk) != numel * size:
                    raise InvalidDelta(f"delta ends inside tensor {entry['name']}")
                out[entry["name"]] = torch.frombuffer(bytearray(chunk), dtype=dtype).reshape(shape) if numel else \
                    torch.empty(shape, dtype=dtype)
                continue
            old = parent.get(entry["name"])
            if old is None or old.dtype != dtype or tuple(old.shape) != shape:
                raise InvalidDelta(f"the parent has no {entry['dtype']} tensor {entry['name']} of shape {list(shape)}")
            count = int(entry["count"])
            gaps_bytes, values_bytes = raw[at : at + 4 * count], raw[at + 4 * count : at + (4 + size) * count]
            at += (4 + size) * count
            if len(values_bytes) != size * count:
                raise InvalidDelta(f"delta ends inside tensor {entry['name']}")
            positions = np.cumsum(_unshuffle(gaps_bytes, np.dtype("<u4"), count), dtype=np.int64)
            if count and (positions[-1] >= numel):
                raise InvalidDelta(f"delta position out of range in {entry['name']}")
            new = old.detach().cpu().contiguous().clone()
            bits = new.reshape(-1).view(_INT_OF_SIZE[size])
            bits[torch.from_numpy(positions)] = torch.from_numpy(_unshuffle(values_bytes, _numpy_int(dtype), count))
            out[entry["name"]] = new
    except (KeyError, TypeError, AttributeError) as exc:
        raise InvalidDelta(f"delta header is malformed: {exc}") from None
    if at != len(raw):
        raise InvalidDelta("delta has trailing bytes")
    return out
