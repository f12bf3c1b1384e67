"""`PolicyLoader`, how workers and validators load each step's policy: after the first step it copies the last
model and loads only the new shards. Through a real Kubo daemon (published, then fetched as a role fetches), on
the real-format Hugging Face folders (Qwen2-style tied bf16 embeddings, Llama-style untied): the copy is
bit-for-bit the model `from_pretrained` builds, it leaves the policy it was copied from untouched, and any
other folder (another architecture, no manifest, shards that do not fit) is loaded by `load_policy`."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import inference.policy as policy_module
from examples.hf_models import llama_style, qwen2_style
from inference.policy import PolicyLoader
from ledger_client.ipfs.checkpoints import fetch_checkpoint, load_model_folder, publish_checkpoint
from ledger_client.ipfs.kubo import KuboClient


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hf")
    return {"qwen2": qwen2_style(root / "qwen2"), "llama": llama_style(root / "llama")}


def _steps(kubo: KuboClient, folder: Path, store: Path, count: int) -> list[Path]:
    """`count` successive policies of the folder's model, each a little trained (every tensor moved), published
    with their parent and delta as the trainer publishes them, and fetched into `store` as a role fetches them."""
    state, config, tokenizer_files = load_model_folder(folder)
    state = {k: v.clone() for k, v in state.items()}
    parent, parent_state, fetched = None, None, []
    for step in range(count):
        published = publish_checkpoint(kubo, state, step=step, parent=parent, config=config,
                                       tokenizer_files=tokenizer_files, parent_state=parent_state)
        fetched.append(fetch_checkpoint(kubo, published.manifest_cid, store, provide=False).path)
        parent, parent_state = published.manifest_cid, state
        state = {k: (v.float() + 0.01 * (step + 1)).to(v.dtype) for k, v in state.items()}
    return fetched


def _same(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for name in sa:
        assert sa[name].dtype == sb[name].dtype and torch.equal(sa[name], sb[name]), name


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_each_later_step_is_the_model_from_pretrained_builds(folders, kubo, tmp_path, family, monkeypatch) -> None:
    steps = _steps(kubo, folders[family], tmp_path / "store", 3)
    built = []
    real_load = policy_module.load_policy
    monkeypatch.setattr(policy_module, "load_policy", lambda folder: built.append(folder) or real_load(folder))
    loader = PolicyLoader()
    loaded = [loader(path) for path in steps]
    assert built == [steps[0]]  # only the first step is built from scratch
    for (model, tokenizer), path in zip(loaded, steps):
        reference, reference_tokenizer = real_load(path)
        _same(model, reference)
        assert not model.training and model.dtype == torch.float32
        ids = torch.tensor([reference_tokenizer.encode("sort 3 1 2")])
        assert tokenizer.encode("sort 3 1 2") == ids[0].tolist()
        with torch.no_grad():
            assert torch.equal(model(ids).logits, reference(ids).logits)
    if family == "qwen2":  # tied embeddings stay tied in the copy
        model = loaded[-1][0]
        assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    first_again, _ = real_load(steps[0])
    _same(loaded[0][0], first_again)  # loading later steps left the first model as it was


def test_another_architecture_or_a_plain_folder_is_built_from_scratch(folders, kubo, tmp_path, monkeypatch) -> None:
    qwen = _steps(kubo, folders["qwen2"], tmp_path / "store", 1)[0]
    llama = _steps(kubo, folders["llama"], tmp_path / "store", 1)[0]
    built = []
    real_load = policy_module.load_policy
    monkeypatch.setattr(policy_module, "load_policy", lambda folder: built.append(folder) or real_load(folder))
    loader = PolicyLoader()
    for path in (qwen, llama, folders["llama"], llama):  # a plain save_pretrained folder has no manifest
        model, _ = loader(path)
        _same(model, real_load(path)[0])
    assert built == [qwen, llama, folders["llama"], llama]


def test_shards_that_do_not_fit_the_last_model_fall_back_to_from_pretrained(folders, kubo, tmp_path,
                                                                           monkeypatch) -> None:
    """Same config and tokenizer, but the shards lack a tensor of the model: not copied (from_pretrained decides)."""
    first = _steps(kubo, folders["llama"], tmp_path / "store", 1)[0]
    state, config, tokenizer_files = load_model_folder(folders["llama"])
    dropped = sorted(state)[-1]
    partial = publish_checkpoint(kubo, {k: v for k, v in state.items() if k != dropped}, step=1, config=config,
                                 tokenizer_files=tokenizer_files)
    lacking = fetch_checkpoint(kubo, partial.manifest_cid, tmp_path / "store", provide=False).path
    built = []
    real_load = policy_module.load_policy
    monkeypatch.setattr(policy_module, "load_policy", lambda folder: built.append(folder) or real_load(folder))
    loader = PolicyLoader()
    loader(first)
    loader(first)  # the same manifest again: copied
    assert built == [first]
    loader(lacking)
    assert built == [first, lacking]
