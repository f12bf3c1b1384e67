"""The committed ABIs and generated bindings match what forge compiles."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from eth_abi import encode as abi_encode

from ledger_client.chain import codegen
from tests.support.paths import ROOT

OUT = ROOT / "contracts" / "out"


@pytest.mark.skipif(not (OUT / "ComputePool.sol").exists(), reason="contracts not compiled (make contracts)")
def test_generated_files_match_compiled_contracts(tmp_path):
    (tmp_path / "abi").mkdir()
    codegen.export(OUT, tmp_path)
    pkg = Path(codegen.__file__).parent
    for generated in ("bindings.py", "contract_errors.py"):
        assert (tmp_path / generated).read_text() == (pkg / generated).read_text(), f"{generated}: run make contracts"
    for name in codegen.CONTRACTS:
        assert json.loads((tmp_path / "abi" / f"{name}.json").read_text()) == json.loads(
            (pkg / "abi" / f"{name}.json").read_text()), f"{name} ABI is stale: run make contracts"


def test_every_contract_function_has_a_typed_method():
    from ledger_client.chain import bindings

    for name in codegen.CONTRACTS:
        abi = json.loads((Path(codegen.__file__).parent / "abi" / f"{name}.json").read_text())["abi"]
        cls = getattr(bindings, name)
        for item in abi:
            if item["type"] == "function":
                method = getattr(cls, codegen.snake(item["name"]))
                assert list(method.__annotations__)[:-1] == [codegen.snake(i["name"]) or f"arg{n}"
                                                             for n, i in enumerate(item["inputs"])]
            if item["type"] == "event":
                cls = bindings.CONTRACT_EVENT_TYPES[name][item["name"]]
                assert cls.EVENT == item["name"]
                # StakeManager's and the ValidatorCourt's `Withdrawn` differ: each contract decodes into its own
                assert [f.name for f in dataclasses.fields(cls)] == [codegen.snake(i["name"]) for i in item["inputs"]
                                                                    ] + ["meta"], f"{name}.{item['name']}"


def test_every_custom_error_is_a_class_of_the_errors_module():
    """`except errors.StaleStep` catches exactly the revert the ABI's `StaleStep` encodes, libraries' errors too."""
    from ledger_client.chain import errors

    for name in codegen.CONTRACTS + codegen.LIBRARIES:
        abi = json.loads((Path(codegen.__file__).parent / "abi" / f"{name}.json").read_text())["abi"]
        for item in (x for x in abi if x["type"] == "error"):
            cls = getattr(errors, item["name"])  # a hand-written class of the same name would shadow it: refused here
            assert issubclass(cls, errors.ContractRevert) and cls.error == item["name"]
            selector = codegen.error_selector(item)
            assert errors.SELECTORS[selector][0] is cls
            args = abi_encode([codegen.canonical_type(i) for i in item["inputs"]], [_zero(i) for i in item["inputs"]])
            decoded = errors.decode_revert(selector + args, "f")
            assert type(decoded) is cls
            assert list(decoded.args_dict) == [i["name"] or f"arg{n}" for n, i in enumerate(item["inputs"])]


def _zero(item: dict):
    """A zero value of ABI parameter `item`."""
    t = item["type"]
    if t.endswith("]"):
        return []
    if t.startswith("tuple"):
        return tuple(_zero(c) for c in item["components"])
    if t == "address":
        return "0x" + "00" * 20
    if t == "bool":
        return False
    if t == "string":
        return ""
    if t.startswith("bytes"):
        return bytes(int(t[5:]) if t[5:] else 0)
    return 0
