"""The committed ABIs and generated bindings match what forge compiles."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ledger_client.chain import codegen

OUT = Path(__file__).resolve().parent.parent / "contracts" / "out"


@pytest.mark.skipif(not (OUT / "ComputePool.sol").exists(), reason="contracts not compiled (make contracts)")
def test_generated_files_match_compiled_contracts(tmp_path):
    (tmp_path / "abi").mkdir()
    codegen.export(OUT, tmp_path)
    pkg = Path(codegen.__file__).parent
    assert (tmp_path / "bindings.py").read_text() == (pkg / "bindings.py").read_text(), "run make contracts"
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
