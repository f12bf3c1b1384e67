"""Real-format Hugging Face checkpoints (examples/hf_models.py): a Qwen2-style folder (ByteLevel BPE, no BOS,
tied embeddings, bf16, ChatML template, two EOS ids) and a Llama-style one (BPE with BOS, untied), both with
a vocabulary over 32k, through the code every role uses: prompt encoding, loading, generation, verification,
the local policy store and the trainer's float32 master weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from examples.hf_models import llama_style, qwen2_style
from inference.local_store import LocalPolicyStore, load_policy_weights
from inference.policy import load_policy, stop_token_ids
from inference.torch_backend import NO_EOS, TorchBackend
from inference.verify import CompletionRecord, VerifyConfig, verify_completions
from proofs.sampling import derive_seed
from proofs.termination import check_termination
from proofs.toploc import build_proofs_batch
from protocol.runspec import RunSpec, SamplingSpec
from tasks.encoding import encode_prompt
from tasks.registry import TaskSpec, build_task
from validator.calibrate import measure, thresholds


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hf")
    return {"qwen2": qwen2_style(root / "qwen2"), "llama": llama_style(root / "llama")}


def test_the_folders_are_what_real_checkpoints_look_like(folders: dict[str, Path]) -> None:
    qwen, qwen_tok = load_policy(folders["qwen2"])
    llama, llama_tok = load_policy(folders["llama"])
    assert qwen.config.vocab_size >= 32_000 and llama.config.vocab_size >= 32_000
    assert qwen.config.tie_word_embeddings and not llama.config.tie_word_embeddings
    with safe_open(folders["qwen2"] / "model.safetensors", "pt") as stored:
        assert {stored.get_slice(k).get_dtype() for k in stored.keys()} == {"BF16"}
    assert qwen_tok.bos_token_id is None and llama_tok.bos_token_id is not None
    assert len(stop_token_ids(qwen, qwen_tok)) == 2 and len(stop_token_ids(llama, llama_tok)) == 1
    # every role computes in float32, whatever the checkpoint stores
    assert qwen.dtype == torch.float32 and llama.dtype == torch.float32


def test_prompts_follow_the_chat_template_and_never_hold_none(folders: dict[str, Path]) -> None:
    _, qwen_tok = load_policy(folders["qwen2"])
    _, llama_tok = load_policy(folders["llama"])
    qwen_ids = encode_prompt(qwen_tok, "Sort: 312")
    llama_ids = encode_prompt(llama_tok, "Sort: 312")
    assert all(isinstance(t, int) for t in qwen_ids + llama_ids)
    assert qwen_tok.decode(qwen_ids) == "<|im_start|>user\nSort: 312<|im_end|>\n<|im_start|>assistant\n"
    assert llama_ids[0] == llama_tok.bos_token_id


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_honest_generation_verifies_at_a_real_vocabulary_size(folders: dict[str, Path], family: str) -> None:
    model, tokenizer = load_policy(folders[family])
    task = build_task(TaskSpec(name="sort", params={"min_digits": 3, "max_digits": 3}))
    prompts = [encode_prompt(tokenizer, task.problem(i).prompt) for i in range(3)] * 2
    seeds = [derive_seed(b"pool", "0x" + "11" * 20, bytes(32), i) for i in range(len(prompts))]
    sampling = SamplingSpec(temperature=1.0, max_tokens=6)
    worker = TorchBackend(model, eos_token_id=stop_token_ids(model, tokenizer), pad_token_id=tokenizer.pad_token_id)
    completions = worker.generate(prompts, sampling, seeds)
    validator_model, _ = load_policy(folders[family])
    validator = TorchBackend(validator_model, eos_token_id=stop_token_ids(validator_model, tokenizer))
    proofs = build_proofs_batch([c.hidden for c in completions], chunk=32)
    records = [CompletionRecord(prompt_ids=p, completion_ids=c.token_ids, proofs=pr, seed=c.seed,
                                finish_reason=c.finish_reason) for p, c, pr in zip(prompts, completions, proofs)]
    verdicts = verify_completions(validator, records, VerifyConfig(sampling=sampling, chunk=32),
                                  expected_prompts=prompts, expected_seeds=seeds)
    assert all(v.passed for v in verdicts), [v.failed for v in verdicts]


def test_any_of_the_stop_tokens_ends_a_completion(folders: dict[str, Path]) -> None:
    model, tokenizer = load_policy(folders["qwen2"])
    prompt = encode_prompt(tokenizer, "Reverse: abc")
    greedy = SamplingSpec(temperature=0, max_tokens=5)
    first = TorchBackend(model, eos_token_id=NO_EOS).generate([prompt], greedy, [0])[0].token_ids[0]
    stops = (*stop_token_ids(model, tokenizer), first)
    (one,) = TorchBackend(model, eos_token_id=stops).generate([prompt], greedy, [0])
    assert one.token_ids == [first] and one.finish_reason == "eos"
    logits = torch.zeros(model.config.vocab_size)
    assert check_termination([5, first], "eos", 5, stops, last_logits=logits).passed
    assert not check_termination([first, 5], "length", 2, stops).passed  # a stop token before the end


def test_the_local_store_round_trips_tied_embeddings(folders: dict[str, Path], tmp_path: Path) -> None:
    model, tokenizer = load_policy(folders["qwen2"])
    with torch.no_grad():
        model.get_input_embeddings().weight.add_(0.01)
    store = LocalPolicyStore(tmp_path, model.config, tokenizer)
    store.publish(1, model.state_dict())
    follower, _ = load_policy(folders["qwen2"])
    load_policy_weights(tmp_path, 1, follower)
    assert torch.equal(follower.get_input_embeddings().weight, model.get_input_embeddings().weight)
    assert follower.get_output_embeddings().weight is follower.get_input_embeddings().weight


def test_float32_master_weights_keep_an_lr_3e7_update_that_bf16_loses(folders: dict[str, Path]) -> None:
    def changed_fraction(dtype: torch.dtype) -> float:
        model, tokenizer = load_policy(folders["qwen2"])
        model = model.to(dtype).train()
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        ids = torch.tensor([encode_prompt(tokenizer, "Sort: 312 -> 123")])
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.optim.AdamW(model.parameters(), lr=3e-7, weight_decay=0.0).step()
        changed = sum(int((p.detach() != before[n]).sum()) for n, p in model.named_parameters() if p.grad is not None)
        total = sum(p.numel() for p in model.parameters() if p.grad is not None)
        return changed / total

    assert changed_fraction(torch.float32) > 0.5
    assert changed_fraction(torch.bfloat16) < 0.05


def test_calibrated_thresholds_pass_honest_bf16_workers_and_catch_other_weights(folders: dict[str, Path]) -> None:
    spec = RunSpec(task=TaskSpec(name="sort", params={"min_digits": 3, "max_digits": 3}), pool_seed="0x" + "ab" * 32,
                   sampling=SamplingSpec(group_size=2, temperature=1.0, max_tokens=6))
    noise = measure(folders["qwen2"], spec, ["float32", "bfloat16"], [1, 3], n_prompts=3)
    assert noise.chunks > 0 and noise.max_logit_diff > 0  # bf16 compute is noisy, float32 on our kernels is not
    verification = thresholds(noise, spec.verification, margin=2.0, margin_matches=4)
    config = VerifyConfig(
        sampling=spec.sampling, chunk=32, logit_tolerance=verification.logit_tolerance,
        thresholds=verification.toploc_thresholds())
    model, tokenizer = load_policy(folders["qwen2"])
    reference = TorchBackend(model, eos_token_id=stop_token_ids(model, tokenizer))
    prompts = [encode_prompt(tokenizer, build_task(spec.task).problem(i).prompt) for i in range(4)]
    seeds = list(range(4))

    def records_from(worker: TorchBackend) -> list[CompletionRecord]:
        completions = worker.generate(prompts, spec.sampling, seeds)
        proofs = build_proofs_batch([c.hidden for c in completions], chunk=32)
        return [CompletionRecord(prompt_ids=p, completion_ids=c.token_ids, proofs=pr, seed=c.seed,
                                 finish_reason=c.finish_reason) for p, c, pr in zip(prompts, completions, proofs)]

    honest_model, _ = load_policy(folders["qwen2"])
    honest = TorchBackend(honest_model, compute_dtype=torch.bfloat16, eos_token_id=stop_token_ids(model, tokenizer))
    assert all(v.passed for v in verify_completions(reference, records_from(honest), config))
    other = qwen2_style(folders["qwen2"].parent / "other", seed=1)
    cheat_model, _ = load_policy(other)
    cheat = TorchBackend(cheat_model, compute_dtype=torch.bfloat16, eos_token_id=stop_token_ids(model, tokenizer))
    assert not any(v.passed for v in verify_completions(reference, records_from(cheat), config))


def test_calibrate_refuses_a_worker_device_it_cannot_use(folders: dict[str, Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from validator.cli import main as validator_main

    task_file = tmp_path / "task.toml"
    task_file.write_text(f'pool_seed = "0x{"ab" * 32}"\n[task]\nname = "sort"\nparams = {{ min_digits = 3, max_digits = 3 }}\n')
    base = ["calibrate", "--checkpoint", str(folders["qwen2"]), "--run-spec", str(task_file), "--prompts", "1"]
    devices = ["bogus"] + ([] if torch.cuda.is_available() else ["cuda"])
    for device in devices:
        assert validator_main([*base, "--worker-device", device]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and "--worker-device" in err[0], err
