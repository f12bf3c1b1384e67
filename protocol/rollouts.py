"""The rollout file: what a worker submits, a validator checks and the trainer learns from.

Format: Apache Parquet, one row per completion, with the file-level header as JSON under
the schema metadata key `proofswarm.rollouts`. Version 3 columns:

| column         | type          | meaning                                                      |
|----------------|---------------|--------------------------------------------------------------|
| group          | int32         | prompt group within the file, 0…n_groups−1                   |
| sample         | int32         | completion within its group, 0…group_size−1                  |
| prompt_index   | int64         | index of the prompt in the task's train split                |
| prompt_ids     | list<int32>   | prompt token ids, as fed to the policy                       |
| completion_ids | list<int32>   | sampled token ids (EOS included when the completion stopped) |
| logprobs       | list<float32> | the worker's log-probability of each sampled token (unchecked: the trainer's logprob_mismatch diagnostic only) |
| reward         | float32       | the task verifier's exact reward (tasks.rewards)             |
| finish_reason  | string        | "eos" or "length"                                            |
| seed           | uint64        | sampling seed (rule v3): proofs.sampling.derive_seed(pool seed,|
|                |               | worker, seed_block_hash, nonce × n_rows + row)               |
| proofs         | list<binary>  | TOPLOC proof per chunk of `proof_chunk` completion tokens    |

Header (`RolloutHeader`): schema version; the submission binding (protocol.submission) — chain id,
pool contract, pool id, worker, policy step, nonce — which must equal the on-chain `submitWork`
record — and the seed block hash (the hash of its `WorkSubmitted.seedBlock`); the manifest digest of the policy used, task spec, sampling spec
(protocol.runspec.SamplingSpec) and proof chunk size. Readers validate everything and raise
`RolloutSchemaError` otherwise.

Every field is re-derived and compared by the validator (validator.checks, inference.verify),
or the file is refused; the challenge reason follows the arrow:

| field               | rule                                                                         |
|---------------------|------------------------------------------------------------------------------|
| schema_name/version | equal to this reader's constants → SCHEMA                                    |
| policy_step         | equal to the on-chain submission's step → WRONG_STEP                         |
| manifest_digest     | equal to the on-chain checkpoint of that step → WRONG_STEP                   |
| worker              | equal to the submitting address → WRONG_WORKER                               |
| chain_id, pool_contract, pool_id, nonce | equal to the chain, contract and `submitWork` record → WRONG_BINDING |
| seed_block_hash     | equal to the hash of the submission's seed block on the chain → WRONG_BINDING |
| task                | equal to the pool's run spec → SCHEMA                                        |
| sampling            | equal to the run spec's (temperature/top_p → SAMPLING, others → SCHEMA)      |
| proof_chunk         | equal to the validator's chunk size → SCHEMA                                 |
| group, sample       | equal to the row's position (row = group × group_size + sample) → SCHEMA     |
| prompt_index        | re-derived by the assignment PRF of (pool seed, worker, nonce) → ASSIGNMENT  |
| prompt_ids          | re-encoded from the task's prompt → ASSIGNMENT; ids in [0, vocab) → SCHEMA   |
| completion_ids      | replayed from the seeded Gumbel noise and recomputed logits → SAMPLING;      |
|                     | ids in [0, vocab), length ≤ max_tokens → SCHEMA                              |
| logprobs            | not compared (the trainer recomputes behaviour log-probs itself; these feed  |
|                     | only its logprob_mismatch diagnostic); one per token, finite, ≤ 0 → SCHEMA    |
| reward              | recomputed by the task verifier, bit-identical (tasks.rewards_equal) → REWARD |
| finish_reason       | "eos" iff the last token is EOS (and EOS was plausible), "length" iff        |
|                     | exactly max_tokens without EOS → TERMINATION                                 |
| seed                | re-derived as derive_seed(pool seed, worker, seed block hash, nonce × rows + row) → SEED |
| proofs              | ceil(len / proof_chunk) proofs of 258 bytes → SCHEMA; each matches the       |
|                     | recomputed hidden states → TOPLOC                                            |

Bounds (`RolloutLimits`, from the pool's run spec via `RolloutLimits.for_spec`): the header is
at most 16 KiB of UTF-8 JSON, nested at most 8 deep (checked by a scan before parsing, since a
recursive parser overflows the C stack on deep nesting), with strings of at most 1024
characters, integers of at most 20 digits and finite numbers; the Parquet footer must declare
exactly prompts_per_submission × group_size rows and no more list values than those rows can
hold (prompt ≤ max_prompt_tokens, completion ≤ max_tokens, proofs ≤ ceil(max_tokens / chunk));
every token's position lies below 2^32 (a header's max_tokens is at most 2^32, and limits whose prompt and completion
bounds add up past 2^32 are refused when made: docs/protocol.md R6.3);
each row group's arrays are checked (lengths, token ids ≥ 0, proof sizes) before they become
Python lists. A small file that would decompress to millions of tokens is refused from its footer.
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from protocol.digest import Digest
from protocol.runspec import POSITION_LIMIT, RunSpec, SamplingSpec
from protocol.submission import ADDRESS_PATTERN, SubmissionBinding
from tasks.registry import TaskSpec

SCHEMA_NAME = "proofswarm.rollouts"
SCHEMA_VERSION = 5
"""v4: completions sampled with sampling rule v2 (proofs.sampling: counter-based Philox noise). Files of v3 and
before were sampled with rule v1 (a CPU Mersenne-Twister stream) and are refused by name."""
METADATA_KEY = SCHEMA_NAME.encode()

ARROW_SCHEMA = pa.schema(
    [
        ("group", pa.int32()),
        ("sample", pa.int32()),
        ("prompt_index", pa.int64()),
        ("prompt_ids", pa.list_(pa.int32())),
        ("completion_ids", pa.list_(pa.int32())),
        ("logprobs", pa.list_(pa.float32())),
        ("reward", pa.float32()),
        ("finish_reason", pa.string()),
        ("seed", pa.uint64()),
        ("proofs", pa.list_(pa.binary())),
    ]
)


MAX_HEADER_BYTES = 16 * 1024
MAX_HEADER_DEPTH = 8
MAX_HEADER_STRING = 1024
MAX_INT_DIGITS = 20
"""2**64 has 20 digits; every header integer must fit an int64 or uint64 (and Python's int() would
raise ValueError beyond 4300 digits)."""
PROOF_BYTES = 258
"""One TOPLOC proof: 2-byte modulus + 128 two-byte coefficients (proofs.toploc, topk = 128)."""


@dataclass(frozen=True)
class RolloutLimits:
    """Bounds a file must meet before its content is materialised; `for_spec` derives the pool's."""

    rows: int | None = None
    """Exact row count (the pool's prompts_per_submission × group_size); None: any up to max_rows."""
    max_rows: int = 4096
    max_prompt_tokens: int = 4096
    max_completion_tokens: int = 32768
    """Also capped by the header's own max_tokens; with max_prompt_tokens at most 2^32, so that every position lies
    below 2^32."""
    max_total_tokens: int = 4_000_000
    proof_chunk: int | None = None
    vocab_size: int | None = None
    max_file_bytes: int = 16 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.max_prompt_tokens + self.max_completion_tokens > POSITION_LIMIT:
            raise ValueError(f"rows of {self.max_prompt_tokens} prompt and {self.max_completion_tokens} completion "
                             "tokens would reach position 2^32: every position lies below 2^32")

    @classmethod
    def for_spec(cls, spec: RunSpec, proof_chunk: int, vocab_size: int | None = None) -> RolloutLimits:
        """The limits of a pool's submissions (the validator's view: the spec, not the file, decides); a row's
        prompt and completion together stay below position 2^32."""
        rows = spec.prompts_per_submission * spec.sampling.group_size
        completion = min(spec.sampling.max_tokens, POSITION_LIMIT - cls.max_prompt_tokens)
        return cls(rows=rows, max_rows=rows, max_completion_tokens=completion, proof_chunk=proof_chunk,
                   vocab_size=vocab_size)


class RolloutFileError(Exception):
    """A rollout file cannot be read or written."""


class RolloutSchemaError(RolloutFileError):
    """A rollout file is not a valid proofswarm rollout file of a supported version."""


class RolloutHeader(BaseModel):
    """File-level facts shared by every completion in the file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_name: Literal["proofswarm.rollouts"] = SCHEMA_NAME
    version: Literal[5] = SCHEMA_VERSION
    chain_id: int = Field(ge=0, description="chain of the pool contract (0 in local mode)")
    pool_contract: str = Field(pattern=ADDRESS_PATTERN, description="the ComputePool the file is submitted to")
    pool_id: int = Field(ge=0)
    worker: str = Field(pattern=ADDRESS_PATTERN)
    policy_step: int = Field(ge=0, description="the step submitted with, whose policy generated the file")
    nonce: int = Field(ge=0, description="the worker's submission nonce in the pool; prompts derive from it")
    seed_block_hash: Digest = Field(default=Digest(bytes(32)), description=(
        "hash of the block that pinned the nonce's step; seeds the sampling (zero in local mode)"))
    manifest_digest: Digest = Field(description="digest of the policy checkpoint's manifest")
    task: TaskSpec = Field(description="the task the prompts and rewards come from")
    sampling: SamplingSpec
    proof_chunk: int = Field(ge=0, description="tokens per TOPLOC proof; 0 = the file carries no proofs")

    @property
    def binding(self) -> SubmissionBinding:
        """The submission this file declares itself to be."""
        return SubmissionBinding(chain_id=self.chain_id, pool_contract=self.pool_contract, pool_id=self.pool_id,
                                 worker=self.worker, step=self.policy_step, nonce=self.nonce,
                                 seed_block_hash=self.seed_block_hash)

    @classmethod
    def bound(cls, binding: SubmissionBinding, **fields: Any) -> RolloutHeader:
        """A header carrying `binding` (plus the policy, task and sampling `fields`)."""
        return cls(chain_id=binding.chain_id, pool_contract=binding.pool_contract, pool_id=binding.pool_id,
                   worker=binding.worker, policy_step=binding.step, nonce=binding.nonce,
                   seed_block_hash=binding.seed_block_hash, **fields)


class RolloutSample(BaseModel):
    """One completion of one prompt."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: int = Field(ge=0)
    sample: int = Field(ge=0)
    prompt_index: int = Field(ge=0)
    prompt_ids: list[int] = Field(min_length=1)
    completion_ids: list[int] = Field(min_length=1)
    logprobs: list[float]
    reward: float
    finish_reason: Literal["eos", "length"]
    seed: int = Field(ge=0, lt=2**64)
    proofs: list[bytes]


class RolloutBatch(BaseModel):
    """A validated rollout file's content: header plus samples ordered by (group, sample)."""

    model_config = ConfigDict(frozen=True)

    header: RolloutHeader
    samples: list[RolloutSample]

    @property
    def n_groups(self) -> int:
        return len(self.samples) // self.header.sampling.group_size


def _check_consistency(batch: RolloutBatch) -> None:
    header, samples = batch.header, batch.samples
    group_size, max_tokens = header.sampling.group_size, header.sampling.max_tokens
    if not samples:
        raise RolloutSchemaError("rollout file has no samples")
    if len(samples) % group_size:
        raise RolloutSchemaError(f"{len(samples)} samples is not a multiple of group_size {group_size}")
    for position, s in enumerate(samples):
        group, sample = divmod(position, group_size)
        where = f"row {position}"
        if (s.group, s.sample) != (group, sample):
            raise RolloutSchemaError(f"{where}: expected group {group} sample {sample}, got {s.group}/{s.sample}")
        first = samples[group * group_size]
        if s.prompt_index != first.prompt_index or s.prompt_ids != first.prompt_ids:
            raise RolloutSchemaError(f"{where}: prompt differs from the rest of group {group}")
        if len(s.logprobs) != len(s.completion_ids):
            raise RolloutSchemaError(f"{where}: {len(s.logprobs)} logprobs for {len(s.completion_ids)} tokens")
        if len(s.completion_ids) > max_tokens:
            raise RolloutSchemaError(f"{where}: {len(s.completion_ids)} tokens exceed max_tokens {max_tokens}")
        if s.finish_reason == "length" and len(s.completion_ids) != max_tokens:
            raise RolloutSchemaError(f"{where}: finish_reason 'length' but only {len(s.completion_ids)} tokens")
        if not all(math.isfinite(x) and x <= 0.0 for x in s.logprobs):
            raise RolloutSchemaError(f"{where}: logprobs must be finite and <= 0")
        if not math.isfinite(s.reward):
            raise RolloutSchemaError(f"{where}: reward is not finite")
        expected_proofs = math.ceil(len(s.completion_ids) / header.proof_chunk) if header.proof_chunk else 0
        if len(s.proofs) != expected_proofs:
            raise RolloutSchemaError(f"{where}: {len(s.proofs)} proofs, expected {expected_proofs}")


def encode_rollouts(batch: RolloutBatch) -> bytes:
    """Serialise a batch to Parquet bytes (validated first)."""
    _check_consistency(batch)
    columns: dict[str, list[Any]] = {name: [] for name in ARROW_SCHEMA.names}
    for s in batch.samples:
        for name in ARROW_SCHEMA.names:
            columns[name].append(getattr(s, name))
    metadata = {METADATA_KEY: batch.header.model_dump_json().encode()}
    table = pa.Table.from_pydict(columns, schema=ARROW_SCHEMA.with_metadata(metadata))
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def decode_rollouts(data: bytes, limits: RolloutLimits | None = None) -> RolloutBatch:
    """Parse and validate Parquet bytes within `limits`; RolloutSchemaError names the first problem.

    Nothing is materialised before it is bounded: the header is size- and depth-checked before
    JSON parsing, and row counts, list lengths and byte sizes are checked against the footer
    metadata before a row group is read, and against the read arrays before Python lists are made.
    """
    limits = limits or RolloutLimits()
    if len(data) > limits.max_file_bytes:
        raise RolloutSchemaError(f"file of {len(data)} bytes exceeds {limits.max_file_bytes}")
    try:
        parquet = pq.ParquetFile(io.BytesIO(data))
        metadata = parquet.metadata
        schema = parquet.schema_arrow
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise RolloutSchemaError(f"not a Parquet file: {clip(str(exc))}") from exc
    raw_header = (metadata.metadata or {}).get(METADATA_KEY)
    if raw_header is None:
        raise RolloutSchemaError(f"no '{SCHEMA_NAME}' header in the file metadata")
    header = parse_header(raw_header)
    if not schema.remove_metadata().equals(ARROW_SCHEMA):
        raise RolloutSchemaError(f"columns {clip(str(schema.names))} with types {clip(str([str(t) for t in schema.types]))} "
                                 f"do not match schema v{SCHEMA_VERSION}")
    bounds = _Bounds.of(header, limits)
    try:
        _check_footer(metadata, bounds)
    except (pa.ArrowException, OSError, ValueError) as exc:  # a footer field that is not what it claims to be
        raise RolloutSchemaError(f"footer unreadable: {clip(str(exc))}") from exc
    samples: list[RolloutSample] = []
    for group in range(metadata.num_row_groups):
        try:
            table = parquet.read_row_group(group)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise RolloutSchemaError(f"row group {group} unreadable: {clip(str(exc))}") from exc
        _check_arrays(table, bounds, first_row=len(samples))
        try:
            samples += [RolloutSample.model_validate(row) for row in table.to_pylist()]
        except ValidationError as exc:
            raise RolloutSchemaError(f"invalid sample: {_first_error(exc)}") from exc
    batch = RolloutBatch(header=header, samples=samples)
    _check_consistency(batch)
    return batch


def parse_header(raw: bytes) -> RolloutHeader:
    """The header from its JSON bytes, refusing oversized, deeply nested or unbounded content."""
    if len(raw) > MAX_HEADER_BYTES:
        raise RolloutSchemaError(f"header of {len(raw)} bytes exceeds {MAX_HEADER_BYTES}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RolloutSchemaError("header is not UTF-8") from exc
    depth = json_depth(text)
    if depth > MAX_HEADER_DEPTH:
        raise RolloutSchemaError(f"header nests deeper than {MAX_HEADER_DEPTH} levels")
    try:
        header_json = json.loads(text, parse_int=_bounded_int, parse_float=_finite_float,
                                 parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise RolloutSchemaError(f"header is not JSON: {exc.msg}") from exc
    except ValueError as exc:
        raise RolloutSchemaError(f"header is not JSON: {clip(str(exc))}") from exc
    _check_strings(header_json)
    if not isinstance(header_json, dict):
        raise RolloutSchemaError("header is not a JSON object")
    old = header_json.get("version")
    if old == 4:
        raise RolloutSchemaError("rollout schema v4 seeds its sampling from the step a submission names (sampling "
                                 "rule v2: a worker could make a file at every step the async level allows and "
                                 f"submit the best), which no pool accepts any more; this reader knows "
                                 f"v{SCHEMA_VERSION} (sampling rule v3: seeds from the nonce's on-chain pin)")
    if isinstance(old, int) and not isinstance(old, bool) and 1 <= old < 4:
        raise RolloutSchemaError(f"rollout schema v{old} was sampled with sampling rule "
                                 f"v1 (a CPU Mersenne-Twister stream), which no pool "
                                 f"accepts any more; this reader knows v{SCHEMA_VERSION} (sampling rule v3)")
    if header_json.get("version") != SCHEMA_VERSION:
        raise RolloutSchemaError(f"unsupported rollout schema version {clip(repr(header_json.get('version')))}; "
                                 f"this reader knows {SCHEMA_VERSION}")
    try:
        return RolloutHeader.model_validate(header_json)
    except ValidationError as exc:
        raise RolloutSchemaError(f"invalid header: {_first_error(exc)}") from exc


def json_depth(text: str) -> int:
    """The deepest nesting of arrays/objects in JSON text, counted without parsing it (so no
    recursion, whatever the depth). Brackets inside strings do not count."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"integer of {len(text)} digits")
    value = int(text)
    if not -(2**63) <= value < 2**64:
        raise ValueError(f"integer {text} outside the 64-bit range")
    return value


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("non-finite number")
    return value


def _refuse_constant(text: str) -> float:
    raise ValueError(f"{text} is not a JSON number")


def _check_strings(value: Any) -> None:
    """Every string (keys included) of parsed header JSON is at most MAX_HEADER_STRING long."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and len(item) > MAX_HEADER_STRING:
            raise RolloutSchemaError(f"header string of {len(item)} characters exceeds {MAX_HEADER_STRING}")
        if isinstance(item, dict):
            stack += list(item.keys()) + list(item.values())
        elif isinstance(item, list):
            stack += item


@dataclass(frozen=True)
class _Bounds:
    """Per-row limits of one file: the tighter of `RolloutLimits` and the header's own values."""

    rows: int | None
    max_rows: int
    prompt: int
    completion: int
    proofs: int
    total_tokens: int
    vocab_size: int | None

    @classmethod
    def of(cls, header: RolloutHeader, limits: RolloutLimits) -> _Bounds:
        if limits.proof_chunk is not None and header.proof_chunk != limits.proof_chunk:
            raise RolloutSchemaError(f"proof_chunk {header.proof_chunk}, the pool uses {limits.proof_chunk}")
        completion = min(header.sampling.max_tokens, limits.max_completion_tokens)
        proofs = math.ceil(completion / header.proof_chunk) if header.proof_chunk else 0
        return cls(limits.rows, limits.max_rows, limits.max_prompt_tokens, completion, proofs,
                   limits.max_total_tokens, limits.vocab_size)


_SCALAR_COLUMNS = ("group", "sample", "prompt_index", "reward", "finish_reason", "seed")


def _check_footer(metadata: pq.FileMetaData, b: _Bounds) -> None:
    """Row and value counts the footer declares, before any data page is decompressed."""
    rows = metadata.num_rows
    if b.rows is not None and rows != b.rows:
        raise RolloutSchemaError(f"{rows} rows, the pool's submissions have {b.rows}")
    if not 0 < rows <= b.max_rows:
        raise RolloutSchemaError(f"{rows} rows, expected 1…{b.max_rows}")
    per_value = {"prompt_ids": b.prompt, "completion_ids": b.completion, "logprobs": b.completion, "proofs": b.proofs}
    totals = dict.fromkeys(per_value, 0)
    uncompressed = 0
    for g in range(metadata.num_row_groups):
        row_group = metadata.row_group(g)
        n = row_group.num_rows
        for c in range(row_group.num_columns):
            column = row_group.column(c)
            name = column.path_in_schema.split(".")[0]
            if name not in _SCALAR_COLUMNS and name not in per_value:
                # the footer's own schema can disagree with the Arrow schema stored beside it (found by bench.fuzz)
                raise RolloutSchemaError(f"row group {g}: the footer names an unknown column {clip(name)!r}")
            uncompressed += column.total_uncompressed_size
            # a list column has one value per element, plus one per empty list
            cap = n if name in _SCALAR_COLUMNS else n * (per_value[name] + 1)
            if column.num_values > cap:
                raise RolloutSchemaError(f"row group {g}: column {name} declares {column.num_values} values, "
                                         f"at most {cap} fit {n} rows")
            if name in totals:
                totals[name] += column.num_values
    if totals["prompt_ids"] + totals["completion_ids"] > b.total_tokens:
        raise RolloutSchemaError(f"{totals['prompt_ids'] + totals['completion_ids']} tokens exceed {b.total_tokens}")
    budget = rows * (16 * 8 + 8 * (b.prompt + 2 * b.completion) + (PROOF_BYTES + 8) * b.proofs) + 65536
    if uncompressed > budget:
        raise RolloutSchemaError(f"columns declare {uncompressed} uncompressed bytes, at most {budget} fit the bounds")


def _check_arrays(table: pa.Table, b: _Bounds, first_row: int) -> None:
    """Lengths and token ranges of one row group's arrays, before they become Python lists."""
    lengths = {name: pc.fill_null(pc.list_value_length(table[name]), 0)
               for name in ("prompt_ids", "completion_ids", "logprobs", "proofs")}
    caps = {"prompt_ids": b.prompt, "completion_ids": b.completion, "logprobs": b.completion, "proofs": b.proofs}
    for name, cap in caps.items():
        longest = pc.max(lengths[name]).as_py() if len(table) else 0
        if longest is not None and longest > cap:
            row = first_row + pc.index(pc.greater(lengths[name], cap), True).as_py()
            raise RolloutSchemaError(f"row {row}: {longest} {name} exceed the bound {cap}")
    for name in ("prompt_ids", "completion_ids"):
        values = pc.list_flatten(table[name])
        if len(values) == 0:
            continue
        extremes = pc.min_max(values).as_py()
        if extremes["min"] is not None and extremes["min"] < 0:
            raise RolloutSchemaError(f"{name}: negative token id {extremes['min']}")
        if b.vocab_size is not None and extremes["max"] is not None and extremes["max"] >= b.vocab_size:
            raise RolloutSchemaError(f"{name}: token id {extremes['max']} outside the vocabulary [0, {b.vocab_size})")
    proof_values = pc.list_flatten(table["proofs"])
    if len(proof_values):
        sizes = pc.min_max(pc.binary_length(proof_values)).as_py()
        if (sizes["min"], sizes["max"]) != (PROOF_BYTES, PROOF_BYTES) and sizes["min"] is not None:
            raise RolloutSchemaError(f"proofs of {sizes['min']}…{sizes['max']} bytes, each must be {PROOF_BYTES}")


def clip(text: str, limit: int = 200) -> str:
    """`text` cut to `limit` characters (attacker-controlled text in errors and evidence)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_error(exc: ValidationError) -> str:
    err = exc.errors(include_input=False, include_url=False)[0]
    return clip(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}")


def write_rollout_file(path: str | Path, batch: RolloutBatch) -> None:
    """Write atomically: a temp file in the same folder, then rename over `path`."""
    path = Path(path)
    data = encode_rollouts(batch)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise RolloutFileError(f"cannot write {path}: {exc.strerror}") from exc


def read_rollout_file(path: str | Path) -> RolloutBatch:
    """Read and validate a rollout file."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise RolloutFileError(f"cannot read {path}: {exc.strerror}") from exc
    return decode_rollouts(data)
