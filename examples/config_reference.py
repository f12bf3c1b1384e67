"""`python -m examples.config_reference`: writes docs/config-reference.md, every key of every TOML file the
commands read, from the pydantic models that parse them (so the reference cannot drift from the code:
tests/unit/docs/test_config_reference.py compares the committed file with a fresh one)."""

from __future__ import annotations

import sys
import types
import typing
from pathlib import Path

from annotated_types import Ge, Gt, Le, Lt, MinLen
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from cli.options import parse_amount
from deploy.pools import CourtConfig, ForcedErrorsConfig, PoolConfig
from protocol.runspec import RunSpec, SamplingSpec, VerificationSpec
from tasks.registry import TaskSpec
from trainer.config import ModelSpec, OptimConfig, TrainerConfig
from trainer.loss import LossConfig

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "config-reference.md"

FILES: tuple[tuple[str, str, str, list[tuple[str, type[BaseModel]]]], ...] = (
    ("Pool config — `pool create --config pool.toml`",
     "examples/pool.toml, examples/pool-court.toml, examples/pool-court-forced.toml, examples/pool-batches.toml",
     "Amounts are base units of the stake token, written as integers or strings (`\"100e18\"`, `\"1.5ether\"`). "
     "`@role` addresses name the devnet's accounts.",
     [("[pool]", PoolConfig), ("[pool.court]", CourtConfig), ("[pool.court.forced_errors]", ForcedErrorsConfig)]),
    ("Run spec — `trainer init --run-spec run.toml`", "examples/run.toml, examples/run-spot.toml, examples/run-env.toml",
     "Published on IPFS; its digest is the pool's `task`. Every worker, validator and trainer of the pool reads it.",
     [("top level", RunSpec), ("[task]", TaskSpec), ("[sampling]", SamplingSpec), ("[verification]", VerificationSpec)]),
    ("Trainer config — `trainer start --config trainer.toml`, `trainer local --config run.toml`", "",
     "Any key can also be given as `--set key=value` (`trainer start`) or `--key value` (`trainer local`), or as "
     "`PROOFSWARM_TRAINER_<KEY>` (nested with `__`). `trainer start` takes `task`, `sampling` and `async_level` from "
     "the pool. An unknown key is an error.",
     [("top level", TrainerConfig), ("[model]", ModelSpec), ("[optim]", OptimConfig), ("[loss]", LossConfig)]),
)


def type_name(annotation: object) -> str:
    """`int`, `float | None`, `list[str]`, a model's table name for nested models."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base, *metadata = typing.get_args(annotation)
        return "amount" if any(getattr(m, "func", None) is parse_amount for m in metadata) else type_name(base)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        return " or ".join(repr(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(type_name(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "none"
    if annotation is Ellipsis:
        return "..."
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    return getattr(annotation, "__name__", str(annotation))


def bounds(field: FieldInfo) -> str:
    marks = {Ge: ("≥", "ge"), Gt: (">", "gt"), Le: ("≤", "le"), Lt: ("<", "lt")}
    parts = []
    for meta in field.metadata:
        for cls, (sign, attribute) in marks.items():
            if isinstance(meta, cls):
                limit = getattr(meta, attribute)
                parts.append(f"{sign} {limit:,}" if isinstance(limit, int) and abs(limit) >= 10_000 else f"{sign} {limit}")
        if isinstance(meta, MinLen):
            parts.append(f"length ≥ {meta.min_length}")
    if "> 0" in parts and "≥ 0" in parts:  # an amount (≥ 0) a field requires to be positive
        parts.remove("≥ 0")
    return ", ".join(parts)


def default(field: FieldInfo) -> str:
    if field.is_required():
        return "**required**"
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    else:
        value = field.default
    if value is PydanticUndefined:
        return "**required**"
    if isinstance(value, BaseModel):
        return "see its table"
    if isinstance(value, Path):
        value = str(value)
    return f"`{value!r}`" if not isinstance(value, str) else f'`"{value}"`'


def table(model: type[BaseModel]) -> list[str]:
    rows = ["| key | type | default | bounds | meaning |", "|---|---|---|---|---|"]
    hints = typing.get_type_hints(model, include_extras=True)
    for name, field in model.model_fields.items():
        meaning = " ".join((field.description or "").split()).replace("|", "\\|")
        kind = "amount" if type_name(hints[name]) == "amount" else type_name(field.annotation)
        rows.append(f"| `{name}` | {kind} | {default(field)} | {bounds(field)} | {meaning} |")
    return rows


def reference() -> str:
    lines = ["# Configuration reference", "",
             "Generated by `python -m examples.config_reference` from the pydantic models that parse each file; "
             "`make test` fails when this page and the models disagree. The rules behind the numbers: "
             "[protocol.md](protocol.md).", ""]
    for title, examples, note, sections in FILES:
        lines += [f"## {title}", "", note + (f" Examples: {examples}." if examples else ""), ""]
        for heading, model in sections:
            doc = " ".join((model.__doc__ or "").split())
            lines += [f"### {heading} — `{model.__name__}`", "", doc, "", *table(model), ""]
    return "\n".join(lines)


def main() -> int:
    OUT.write_text(reference())
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
