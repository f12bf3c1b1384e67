"""Hostile rollout files: bytes built to stop a validator rather than to pass its checks.

Each function turns an honest file's bytes into an attack on the reader (issue 12, items
10–13); a validator must challenge every one with Reason.SCHEMA and carry on judging.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from protocol.rollouts import METADATA_KEY


def _table(honest: bytes) -> tuple[pa.Table, dict]:
    table = pq.read_table(io.BytesIO(honest))
    return table, json.loads(table.schema.metadata[METADATA_KEY])


def _write(table: pa.Table, header: bytes) -> bytes:
    sink = io.BytesIO()
    meta = {**(table.schema.metadata or {}), METADATA_KEY: header}
    pq.write_table(table.replace_schema_metadata(meta), sink, compression="zstd")
    return sink.getvalue()


def huge_version_string(honest: bytes, length: int = 250_000) -> bytes:
    """The header's `version` holds `length` characters (echoed into evidence, it would not fit IPFS)."""
    table, header = _table(honest)
    return _write(table, json.dumps({**header, "version": "v" * length}).encode())


def deep_header(honest: bytes, depth: int = 99_000) -> bytes:
    """A header nested `depth` levels deep (a recursive JSON parser overflows the C stack)."""
    table, _ = _table(honest)
    return _write(table, b"[" * depth + b"]" * depth)


def long_integer(honest: bytes, digits: int = 5_000) -> bytes:
    """A `policy_step` of `digits` digits (Python's int() refuses > 4300 with ValueError)."""
    table, header = _table(honest)
    text = json.dumps({**header, "policy_step": 0})
    return _write(table, text.replace('"policy_step": 0', '"policy_step": ' + "9" * digits).encode())


def negative_token(honest: bytes) -> bytes:
    """The first completion's first token id is -1."""
    table, header = _table(honest)
    rows = table.column("completion_ids").to_pylist()
    rows[0][0] = -1
    index = table.schema.get_field_index("completion_ids")
    table = table.set_column(index, table.schema.field(index), pa.array(rows, pa.list_(pa.int32())))
    return _write(table, json.dumps(header).encode())


def token_bomb(honest: bytes, tokens: int = 25_000_000) -> bytes:
    """A few KB that decompress to `tokens` completion tokens (and as many logprobs)."""
    table, header = _table(honest)
    rows = table.num_rows
    per_row = tokens // rows
    offsets = pa.array(np.arange(0, (rows + 1) * per_row, per_row, dtype=np.int32))
    for name, dtype in (("completion_ids", np.int32), ("logprobs", np.float32)):
        values = pa.ListArray.from_arrays(offsets, pa.array(np.zeros(rows * per_row, dtype=dtype)))
        index = table.schema.get_field_index(name)
        table = table.set_column(index, table.schema.field(index), values)
    return _write(table, json.dumps(header).encode())


HOSTILE_FILES = {
    "huge_version_string": huge_version_string,
    "deep_header": deep_header,
    "long_integer": long_integer,
    "negative_token": negative_token,
    "token_bomb": token_bomb,
}
