"""An exact pool never gets a policy exact mode cannot quantise (docs/protocol.md R5.8): `trainer init` refuses one
in one line before anything is published, and `trainer start` stops at the step whose policy training pushed past
exact mode's bounds, before that step is checkpointed or published; a float pool takes any policy."""

from __future__ import annotations

import tomllib

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from cli.errors import UsageError, exit_code_of
from inference.exact import MAX_WEIGHT
from inference.tiny import build_char_tokenizer, build_tiny_llama
from protocol.runspec import RunSpec
from tests.support.paths import ROOT
from tests.unit.trainer.test_trainer import _batch, _config, _model
from trainer.bootstrap import check_exact_policy
from trainer.checkpoint import load_latest_checkpoint
from trainer.loop import Trainer, UnpublishablePolicy
from trainer.publish import exact_policy_problem
from trainer.work_source import InMemorySource


def _spec(inference: str) -> RunSpec:
    return RunSpec.model_validate(tomllib.loads((ROOT / "examples" / "run.toml").read_text()) | {"inference": inference})


def test_an_exact_pool_refuses_a_model_family_it_cannot_quantise():
    gpt2 = GPT2LMHeadModel(GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=32, n_positions=32))
    with pytest.raises(UsageError, match="cannot be quantised: exact mode supports llama and qwen2 models, not gpt2"):
        check_exact_policy(_spec("exact"), gpt2)
    check_exact_policy(_spec("float"), gpt2)
    check_exact_policy(_spec("exact"), build_tiny_llama(len(build_char_tokenizer()), 0, hidden=16, layers=1, heads=2))


def test_a_weight_past_exact_modes_bound_is_refused_in_an_exact_pool_only():
    model = _model()
    assert exact_policy_problem(_spec("exact"), model) is None
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight[0, 0] = 1.25 * MAX_WEIGHT
    assert exact_policy_problem(_spec("exact"), model) == f"layers.0.up: a weight of magnitude 40.0 ≥ {MAX_WEIGHT}"
    assert exact_policy_problem(_spec("float"), model) is None
    with pytest.raises(UsageError, match="cannot be quantised: layers.0.up: a weight of magnitude 40.0"):
        check_exact_policy(_spec("exact"), model)


def test_the_trainer_stops_before_checkpointing_or_publishing_a_step_trained_past_the_bounds(tmp_path):
    published = []
    source = InMemorySource()
    trainer = Trainer(_config(tmp_path), _model(), source, publishers=[lambda step, state: published.append(step)],
                      policy_check=lambda model: exact_policy_problem(_spec("exact"), model))
    trainer.start()
    assert published == [0]
    with torch.no_grad():  # what a run of large updates does to one weight: one more step cannot bring it back
        trainer.model.model.layers[0].mlp.up_proj.weight[0, 0] = 1.25 * MAX_WEIGHT
    source.put("a", _batch(0))
    with pytest.raises(UnpublishablePolicy) as refused:
        trainer.train_step()
    message = str(refused.value)
    assert message.startswith("step 1: the pool cannot run this policy, so it is not published: layers.0.up: a "
                              "weight of magnitude 4") and f"≥ {MAX_WEIGHT}" in message
    assert "\n" not in message and exit_code_of(refused.value, (UnpublishablePolicy,)) == 1  # one `error:` line
    assert published == [0]  # no publisher saw step 1: no shards, no manifest, no publishCheckpoint
    assert load_latest_checkpoint(tmp_path / "checkpoints").step == 0  # a restart redoes step 1
    assert not (tmp_path / "metrics.jsonl").exists()  # nor a metrics line for it


def test_a_float_pools_trainer_publishes_the_same_step(tmp_path):
    published = []
    source = InMemorySource()
    trainer = Trainer(_config(tmp_path), _model(), source, publishers=[lambda step, state: published.append(step)])
    trainer.start()
    with torch.no_grad():
        trainer.model.model.layers[0].mlp.up_proj.weight[0, 0] = 1.25 * MAX_WEIGHT
    source.put("a", _batch(0))
    trainer.train_step()
    assert published == [0, 1]
