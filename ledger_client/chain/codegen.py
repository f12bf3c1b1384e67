"""Generate the contract ABIs and typed Python bindings from forge's compiled artifacts.

Run by `make contracts` after `forge build`:

    python -m ledger_client.chain.codegen contracts/out

It writes `ledger_client/chain/abi/<Name>.json` (abi + creation bytecode),
`ledger_client/chain/bindings.py` (one typed class per contract, one dataclass per event, one NamedTuple per
struct a function takes or returns and per view returning several named values) and
`ledger_client/chain/contract_errors.py` (one `ContractRevert` subclass per custom error, ours and OpenZeppelin's,
and the selector table `errors.decode_revert` reads). All are committed so the package works without forge;
`tests/unit/ledger_client/test_bindings.py` checks they match the compiled contracts.
"""

from __future__ import annotations

import json
import keyword
import re
import sys
from pathlib import Path

from eth_utils import keccak

CONTRACTS = ("StakeManager", "ComputePool", "ValidatorCourt", "DevStakeToken", "ForcedErrors", "WorkBatches")
LIBRARIES = ("CourtRules", "ValidatorSet", "DisputeSettlement")
"""Linked libraries (the ValidatorCourt's, so that it fits EIP-170): artifacts only, no bindings."""
PACKAGE_DIR = Path(__file__).resolve().parent


def snake(name: str) -> str:
    """`submitWork` → `submit_work`; trailing/leading underscores of Solidity names are dropped."""
    name = name.strip("_")
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    return s + "_" if keyword.iskeyword(s) or s in {"self", "sender"} else s


RENAMED = {"IWorkBatches.Params": "BatchParams"}
"""Structs whose short name another contract's struct has already (`IForcedErrors.Params`): their binding's name."""


def struct_name(item: dict) -> str | None:
    """`PoolView` for an ABI entry of internal type `struct IComputePool.PoolView` (or an array of it)."""
    internal = item.get("internalType", "")
    if not internal.startswith("struct "):
        return None
    full = internal[len("struct "):].split("[")[0]
    return RENAMED.get(full, full.split(".")[-1])


def py_type(abi_type: str, item: dict | None = None) -> str:
    """Python annotation for a Solidity ABI type (`item`, the ABI entry, names structs)."""
    if abi_type.endswith("]"):
        return f"list[{py_type(abi_type[: abi_type.rindex('[')], item)}]"
    if abi_type == "tuple" and item is not None and struct_name(item):
        return struct_name(item)
    if abi_type.startswith(("uint", "int")):
        return "int"
    if abi_type == "address" or abi_type == "string":
        return "str"
    if abi_type == "bool":
        return "bool"
    if abi_type.startswith("bytes"):
        return "bytes"
    return "Any"  # tuples (structs) come back as tuples / are passed as tuples or dicts


def _params(inputs: list[dict]) -> list[tuple[str, str]]:
    out = []
    for i, inp in enumerate(inputs):
        name = snake(inp["name"]) if inp.get("name") else f"arg{i}"
        out.append((name, py_type(inp["type"], inp)))
    return out


def result_name(function: dict) -> str | None:
    """`CasesResult` for a view with several named outputs (a public mapping of a struct, say):
    its values come back as that NamedTuple, read by field name. None otherwise."""
    outputs = function["outputs"]
    if len(outputs) < 2 or not all(o.get("name") for o in outputs):
        return None
    return function["name"][0].upper() + function["name"][1:] + "Result"


def _return_type(function: dict) -> str:
    outputs = function["outputs"]
    if not outputs:
        return "None"
    if len(outputs) == 1:
        return py_type(outputs[0]["type"], outputs[0])
    return result_name(function) or "tuple"


def _collect_structs(items: list[dict], into: dict[str, list[dict]]) -> None:
    """Every struct among `items` (ABI parameters), nested ones first, by name."""
    for item in items:
        if item["type"].startswith("tuple"):
            _collect_structs(item["components"], into)
            name = struct_name(item)
            if name and name in into and into[name] != item["components"]:
                raise ValueError(f"two structs are named {name} ({item['internalType']}): add one to RENAMED")
            if name and name not in into:
                into[name] = item["components"]


def _decoder(item: dict, expr: str) -> str:
    """Python expression turning the web3 value `expr` of ABI parameter `item` into its typed form."""
    name = struct_name(item)
    if name is None:
        return expr
    if item["type"].endswith("]"):
        return f"[{name}.from_abi(x) for x in {expr}]"
    return f"{name}.from_abi({expr})"


def _render_struct(name: str, components: list[dict], doc: str | None = None) -> list[str]:
    # a NamedTuple: web3 encodes it as the tuple it is, and positional readers keep working
    fields = [(snake(c["name"]), py_type(c["type"], c), c) for c in components]
    lines = ["", "", f"class {name}(NamedTuple):", f'    """{doc or f"Struct `{name}`."}"""', ""]
    lines += [f"    {f}: {t}" for f, t, _ in fields]
    lines += ["", "    @classmethod", f"    def from_abi(cls, value: Any) -> {name}:",
              '        """From the tuple web3 decodes (nested structs become their classes too)."""',
              "        return cls("]
    lines += [f"            {f}={_decoder(c, f'value[{i}]')}," for i, (f, _, c) in enumerate(fields)]
    lines += ["        )"]
    return lines


def render_bindings(abis: dict[str, list[dict]]) -> str:
    lines = [
        '"""Typed bindings for the proofswarm contracts — GENERATED by ledger_client.chain.codegen, do not edit."""',
        "",
        "from __future__ import annotations",
        "",
        "from dataclasses import dataclass",
        "from typing import Any, ClassVar, NamedTuple",
        "",
        "from ledger_client.chain.contract import BoundContract, EventMeta",
    ]
    structs: dict[str, list[dict]] = {}
    for abi in abis.values():
        for item in abi:
            if item["type"] == "function":
                _collect_structs(item["inputs"] + item["outputs"], structs)
    lines += ["", "", "# ---- structs (one NamedTuple per struct a function takes or returns)"]
    for sname, components in structs.items():
        lines += _render_struct(sname, components)
    lines += ["", "", "# ---- results (one NamedTuple per view returning several named values)"]
    for cname, abi in abis.items():
        for item in sorted((x for x in abi if x["type"] == "function"), key=lambda x: x["name"]):
            rname = result_name(item)
            if rname and item["stateMutability"] in ("view", "pure"):
                lines += _render_struct(rname, item["outputs"], f"What `{cname}.{item['name']}` returns.")
    lines.append("")
    event_fields: dict[tuple[str, str], list[str]] = {}
    for cname, abi in abis.items():
        lines += ["", f"class {cname}(BoundContract):", f'    """Binding of `{cname}.sol`."""', "", f'    NAME = "{cname}"']
        for item in sorted((x for x in abi if x["type"] == "function"), key=lambda x: x["name"]):
            params = _params(item["inputs"])
            sig = ", ".join(["self"] + [f"{n}: {t} | tuple" if struct_name(i) else f"{n}: {t}"
                                        for (n, t), i in zip(params, item["inputs"])])
            args = ", ".join(n for n, _ in params)
            view = item["stateMutability"] in ("view", "pure")
            lines.append("")
            if view:
                call = f'self._call("{item["name"]}"{", " if args else ""}{args})'
                if len(item["outputs"]) == 1:
                    call = _decoder(item["outputs"][0], call)
                elif result_name(item):
                    call = f"{result_name(item)}.from_abi({call})"
                lines.append(f"    def {snake(item['name'])}({sig}) -> {_return_type(item)}:")
                lines.append(f'        """Call `{item["name"]}` (view)."""')
                lines.append(f"        return {call}")
            else:
                lines.append(f"    def {snake(item['name'])}({sig}) -> Any:")
                lines.append(f'        """Send a `{item["name"]}` transaction; returns the receipt."""')
                lines.append(f'        return self._transact("{item["name"]}"{", " if args else ""}{args})')
        for item in (x for x in abi if x["type"] == "event"):
            event_fields[(cname, item["name"])] = [f"    {snake(i['name'])}: {py_type(i['type'])}"
                                                   for i in item["inputs"]]
    # An event name two contracts declare with different fields (StakeManager's and the ValidatorCourt's
    # `Withdrawn`) gets one class per contract, named after it: `StakeManagerWithdrawn`, `ValidatorCourtWithdrawn`.
    shapes: dict[str, set[tuple[str, ...]]] = {}
    for (_, ename), fields in event_fields.items():
        shapes.setdefault(ename, set()).add(tuple(fields))
    class_of = {(c, e): e if len(shapes[e]) == 1 else f"{c}{e}" for c, e in event_fields}
    classes = {class_of[key]: (key[1], fields) for key, fields in event_fields.items()}
    lines += ["", "", "# ---- events (one dataclass per event of every contract)"]
    for cls_name, (ename, fields) in sorted(classes.items()):
        lines += ["", "", "@dataclass(frozen=True)", f"class {cls_name}:", f'    """Event `{ename}`."""', ""]
        lines += [f'    EVENT: ClassVar[str] = "{ename}"'] + fields + ["    meta: EventMeta"]
    lines += ["", "", "# events by name, for the names that mean one thing in every contract (CONTRACT_EVENT_TYPES has all)",
              "EVENT_TYPES: dict[str, type] = {"]
    lines += [f'    "{e}": {e},' for e in sorted(shapes) if len(shapes[e]) == 1]
    lines += ["}", "", "CONTRACT_EVENT_TYPES: dict[str, dict[str, type]] = {"]
    for cname in abis:
        lines.append(f'    "{cname}": {{')
        lines += [f'        "{e}": {class_of[(c, e)]},' for (c, e) in sorted(event_fields) if c == cname]
        lines.append("    },")
    lines += ["}", ""]
    return "\n".join(lines)


def canonical_type(item: dict) -> str:
    """The ABI type of parameter `item` as a signature writes it: `(uint256,address)[]` for an array of structs."""
    t = item["type"]
    if t.startswith("tuple"):
        return "(" + ",".join(canonical_type(c) for c in item["components"]) + ")" + t[len("tuple"):]
    return t


def error_selector(item: dict) -> bytes:
    """The 4 bytes a revert with the custom error `item` (an ABI entry) starts with."""
    return keccak(text=f"{item['name']}({','.join(canonical_type(i) for i in item['inputs'])})")[:4]


def render_errors(abis: dict[str, list[dict]]) -> str:
    """contract_errors.py: one `ContractRevert` subclass per custom error name of `abis` (contracts and libraries;
    an error several of them declare is one class), and `SELECTORS`, each selector's class and arguments."""
    declared: dict[str, list[str]] = {}  # error name -> the contracts that declare it
    selectors: dict[bytes, tuple[str, list[tuple[str, str]]]] = {}
    shown: dict[str, str] = {}  # error name -> its declaration, for the docstring
    for cname, abi in abis.items():
        for item in (x for x in abi if x["type"] == "error"):
            declared.setdefault(item["name"], []).append(cname)
            args = [(i["name"] or f"arg{n}", canonical_type(i)) for n, i in enumerate(item["inputs"])]
            selectors.setdefault(error_selector(item), (item["name"], args))
            shown.setdefault(item["name"], f"{item['name']}({', '.join(f'{t} {a}' for a, t in args)})")
    names = sorted(declared)
    lines = [
        '"""One exception class per custom error of the proofswarm contracts (ours and OpenZeppelin\'s) — GENERATED',
        "by ledger_client.chain.codegen, do not edit. Import them from ledger_client.chain.errors:",
        "`except errors.StaleStep`.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Final",
        "",
        "from ledger_client.chain.error_bases import ContractRevert",
        "",
        "__all__ = [",
    ]
    lines += [f'    "{n}",' for n in names]
    lines += ["]"]
    for n in names:
        lines += ["", "", f"class {n}(ContractRevert):",
                  f'    """`{shown[n]}` of {", ".join(sorted(set(declared[n])))}."""', "", f'    error = "{n}"']
    lines += ["", "", "SELECTORS: Final[dict[bytes, tuple[type[ContractRevert], tuple[tuple[str, str], ...]]]] = {"]
    for selector, (n, args) in sorted(selectors.items(), key=lambda kv: (kv[1][0], kv[0])):
        pairs = ", ".join(f'("{a}", "{t}")' for a, t in args) + ("," if len(args) == 1 else "")
        head = f'    bytes.fromhex("{selector.hex()}"): ('
        line = f"{head}{n}, ({pairs})),"
        lines += [line] if len(line) <= 120 else [f"{head}{n},", " " * len(head) + f"({pairs})),"]
    lines += ["}", '"""Each custom error\'s 4-byte selector: its class and its arguments (name, ABI type)."""', ""]
    return "\n".join(lines)


def export(out_dir: Path, package_dir: Path = PACKAGE_DIR) -> None:
    """Write abi/*.json, bindings.py and contract_errors.py from forge's `out/` folder."""
    abi_dir = package_dir / "abi"
    abi_dir.mkdir(exist_ok=True)
    abis, every_abi = {}, {}
    for name in CONTRACTS + LIBRARIES:
        art = json.loads((out_dir / f"{name}.sol" / f"{name}.json").read_text())
        every_abi[name] = art["abi"]
        if name in CONTRACTS:
            abis[name] = art["abi"]
        doc = {"contractName": name, "abi": art["abi"], "bytecode": art["bytecode"]["object"]}
        links = {lib: [ref["start"] for ref in refs]  # byte offsets of each library's address placeholders
                 for libs in art["bytecode"].get("linkReferences", {}).values() for lib, refs in libs.items()}
        if links:
            doc["links"] = links
        _write_if_changed(abi_dir / f"{name}.json", json.dumps(doc, indent=1, sort_keys=True) + "\n")
    _write_if_changed(package_dir / "bindings.py", render_bindings(abis))
    _write_if_changed(package_dir / "contract_errors.py", render_errors(every_abi))


def _write_if_changed(path: Path, text: str) -> None:
    if path.exists() and path.read_text() == text:
        return
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m ledger_client.chain.codegen <forge out dir>")
    export(Path(sys.argv[1]))
