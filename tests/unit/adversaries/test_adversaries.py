"""The catalogue (adversaries/__init__.py) names every attack of the room, and every name it lists is defined."""

from __future__ import annotations

import re

import adversaries
from adversaries import files, models, samplers, toploc, validators, workers
from bench.attacks import DEFAULT_SPEC
from protocol.runspec import load_run_spec


def test_every_table_of_the_room_is_the_catalogues() -> None:
    assert list(workers.ATTACKS) == list(adversaries.WORKER_ATTACKS)
    assert list(files.HOSTILE_FILES) == list(adversaries.FILE_ATTACKS)
    assert list(models.CHANGES) == list(adversaries.MODEL_CHANGES)
    assert set(validators.CONDUCTS) - {"honest"} == set(adversaries.VALIDATOR_CONDUCTS)


def test_the_samplers_are_the_catalogues_with_the_worker_attacks_that_make_a_file() -> None:
    spec = load_run_spec(DEFAULT_SPEC)
    table = samplers.attacks(spec)
    files_of_workers = [name for name in adversaries.WORKER_ATTACKS if name != "withheld"]
    assert list(table) == files_of_workers + list(adversaries.SAMPLER_ATTACKS)
    assert "out-of-nucleus tokens (top_p 0.9), forged" not in samplers.attacks(None)


def test_the_proof_suite_is_the_catalogues_with_one_attack_per_layer() -> None:
    table = toploc.attacks(toploc.SuiteSetup(layers=3))
    assert [name for name in table if name.startswith("layer ")] == [f"layer {i} perturbed by 1%" for i in range(3)]
    assert list(dict.fromkeys(re.sub(r"^layer \d+ ", "layer {layer} ", name) for name in table)) == \
        list(adversaries.TOPLOC_ATTACKS)
