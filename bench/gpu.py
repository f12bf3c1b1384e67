"""GPU figures: honest bf16 noise of CUDA workers against the CPU float32 validator, and what checking costs
next to generating on a GPU.

    python -m bench.gpu [--device cuda] [--quick] [--skip-timing]

`noise` (fixture folders of examples/hf_models.py, hidden 256, V ≈ 32k): for each family, workers in bf16 on
`--device` and, for comparison, bf16 on the CPU generate honest completions at batch sizes 1, 8 and 32; the
validator's reference is float32 on the CPU (validator.calibrate.measure). Then thresholds calibrated from the
CPU-bf16 noise and from the device noise verify fresh honest device completions (`honest`: none may be
rejected for thresholds a pool can use), completions of another model's weights (`cheat`) and of the same
weights perturbed by 1 % (`perturbed`, examples/adversaries/workers.py's attack): all must be rejected.

`timing` (a Qwen2.5-0.5B-shaped folder: hidden 896, 24 layers, 14 / 2 heads, V 151,936, random weights),
tokens per second of
- `decode_bf16`: the decode forward passes alone (KV cache, argmax on the device) — the GPU work of a worker
  whose sampler costs nothing (what vLLM approaches);
- `generate_bf16`: TorchBackend.generate (sampling on the CPU, as the torch backend ships);
- `prefill_bf16`, `prefill_fp32`: TorchBackend.prefill_batch of the same sequences on the device (its
  float32 [n, V] logits are copied to the host, where the checks read them);
- `forward_bf16`, `forward_fp32`: the same prefill's forward passes and LM head with everything left on the
  device — the GPU work of checking, without the host copy;
- `prefill_fp32_cpu`: the validator's float32 reference on the CPU (16 threads or what the machine has).
`check_cost_fraction_*` = decode tokens/s ÷ prefill (or forward) tokens/s: the validator's seconds per
second of worker decoding at q = 1 (multiply by q for spot checks). Decoding is timed at `batch` and at
`big_batch` rows (`decode_bf16_big`), since a GPU decodes many rows for little more than the price of one.

Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from examples.hf_models import llama_style, qwen2_style
from inference.policy import load_policy, stop_token_ids
from inference.torch_backend import NO_EOS, TorchBackend
from inference.verify import CompletionRecord, verify_completions
from proofs.sampling import derive_seed
from proofs.toploc import build_proofs_batch
from protocol.runspec import RunSpec, SamplingSpec
from tasks.encoding import encode_prompt
from tasks.registry import TaskSpec, build_task
from validator.calibrate import measure, thresholds
from validator.checks import verify_config_of

WORKER = "0x" + "77" * 20


def _spec(max_tokens: int) -> RunSpec:
    return RunSpec(task=TaskSpec(name="sort", params={"min_digits": 3, "max_digits": 3}), pool_seed="0x" + "ab" * 32,
                   sampling=SamplingSpec(group_size=2, temperature=1.0, max_tokens=max_tokens))


def _records(worker: TorchBackend, prompts, spec: RunSpec, seeds) -> list[CompletionRecord]:
    completions = worker.generate(prompts, spec.sampling, seeds)
    proofs = build_proofs_batch([c.hidden for c in completions], chunk=32)
    return [CompletionRecord(prompt_ids=p, completion_ids=c.token_ids, proofs=pr, seed=c.seed, logprobs=c.logprobs,
                             finish_reason=c.finish_reason) for p, c, pr in zip(prompts, completions, proofs)]


def _rejected(folder: Path, worker_folder: Path, spec: RunSpec, device: str, n: int, batch: int,
              perturb: float = 0.0) -> dict:
    """Verify n fresh bf16 completions of `worker_folder`'s weights (each scaled by 1 + perturb·N(0, 1)) made
    on `device` against `folder`'s float32 CPU reference; the failed checks counted."""
    model, tokenizer = load_policy(folder)
    stops = stop_token_ids(model, tokenizer)
    validator = TorchBackend(model, eos_token_id=stops)
    worker_model, _ = load_policy(worker_folder)
    if perturb:
        generator = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for weight in worker_model.parameters():
                weight.mul_(1 + perturb * torch.randn(weight.shape, generator=generator, dtype=weight.dtype))
    worker = TorchBackend(worker_model, compute_dtype=torch.bfloat16, eos_token_id=stops, device=device)
    task = build_task(spec.task)
    prompts = [encode_prompt(tokenizer, task.problem(1000 + i).prompt) for i in range(n)]
    seeds = [derive_seed(spec.pool_seed_bytes, WORKER, 0, i) for i in range(n)]
    config = verify_config_of(spec)
    rejected, failed = 0, {}
    for start in range(0, n, batch):
        group, group_seeds = prompts[start:start + batch], seeds[start:start + batch]
        for verdict in verify_completions(validator, _records(worker, group, spec, group_seeds), config,
                                          expected_prompts=group, expected_seeds=group_seeds):
            if not verdict.passed:
                rejected += 1
                for name in verdict.failed:
                    failed[name] = failed.get(name, 0) + 1
    return {"completions": n, "rejected": rejected, "failed_checks": failed}


def noise_figures(root: Path, device: str, quick: bool, families: list[str]) -> dict:
    spec = _spec(max_tokens=32 if quick else 64)
    prompts, batches, fresh = (8, [1, 8], 16) if quick else (32, [1, 8, 32], 64)
    out = {}
    for family in families:
        build = {"qwen2": qwen2_style, "llama": llama_style}[family]
        folder = build(root / family, hidden=256)
        other = build(root / f"{family}-other", hidden=256, seed=1)
        started = time.perf_counter()
        on_device = measure(folder, spec, ["bfloat16"], batches, prompts, worker_device=device)
        on_cpu = measure(folder, spec, ["bfloat16"], batches, prompts, worker_device="cpu")
        row = {"device_noise": _noise(on_device), "cpu_bf16_noise": _noise(on_cpu), "device_cases": on_device.cases}
        for name, noise in (("cpu_calibrated", on_cpu), ("device_calibrated", on_device)):
            calibrated = spec.model_copy(update={"verification": thresholds(noise, spec.verification, 2.0, 4)})
            row[name] = {"verification": calibrated.verification.model_dump(),
                         "honest": _rejected(folder, folder, calibrated, device, fresh, 16),
                         "cheat": _rejected(folder, other, calibrated, device, fresh, 16),
                         "perturbed": _rejected(folder, folder, calibrated, device, fresh, 16, perturb=0.01)}
        row["seconds"] = round(time.perf_counter() - started, 1)
        out[family] = row
        print(json.dumps({family: {k: v for k, v in row.items() if k != "device_cases"}}), flush=True)
    return out


def _noise(noise) -> dict:
    return {"chunks": noise.chunks, "min_exp_matches": noise.min_exp_matches,
            "max_mant_err_mean": noise.max_mant_err_mean, "max_mant_err_median": noise.max_mant_err_median,
            "max_logit_diff": noise.max_logit_diff}


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@torch.inference_mode()
def _decode_tokens_per_s(backend: TorchBackend, prompts: list[list[int]], new_tokens: int) -> float:
    """Greedy decoding with a KV cache, argmax on the device: the forward passes of generation alone."""
    from transformers import DynamicCache

    device = backend.device
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[backend.pad_token_id] * (width - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    _synchronize(device)
    start = time.perf_counter()
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    out = backend.decoder(input_ids=ids, attention_mask=mask, position_ids=positions,
                          cache=DynamicCache(config=backend.model.config), use_cache=True)
    position = positions[:, -1:] + 1
    ones = torch.ones((len(prompts), 1), dtype=mask.dtype, device=device)
    for _ in range(new_tokens):
        next_ids = backend.lm_head(out.last_hidden_state[:, -1]).argmax(-1, keepdim=True)
        mask = torch.cat([mask, ones], dim=1)
        out = backend.decoder(input_ids=next_ids, attention_mask=mask, position_ids=position, cache=out.cache,
                              use_cache=True)
        position = position + 1
    _synchronize(device)
    return len(prompts) * new_tokens / (time.perf_counter() - start)


def _prefill_tokens_per_s(backend: TorchBackend, pairs, batch: int) -> float:
    _synchronize(backend.device)
    start = time.perf_counter()
    for i in range(0, len(pairs), batch):
        backend.prefill_batch(pairs[i:i + batch])
    _synchronize(backend.device)
    return sum(len(c) for _, c in pairs) / (time.perf_counter() - start)


@torch.inference_mode()
def _forward_tokens_per_s(backend: TorchBackend, pairs, batch: int) -> float:
    """prefill_batch's forward passes and LM head over the completion positions, left on the device."""
    device = backend.device
    _synchronize(device)
    start = time.perf_counter()
    for i in range(0, len(pairs), batch):
        group = [list(p) + list(c)[:-1] for p, c in pairs[i:i + batch]]
        width = max(len(s) for s in group)
        ids = torch.tensor([s + [backend.pad_token_id] * (width - len(s)) for s in group], device=device)
        mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in group], device=device)
        hidden = backend.decoder(input_ids=ids, attention_mask=mask,
                                 position_ids=(mask.cumsum(-1) - 1).clamp_min(0)).last_hidden_state
        for row, (prompt, completion) in enumerate(pairs[i:i + batch]):
            first = len(prompt) - 1
            backend.lm_head(hidden[row, first:first + len(completion)]).float().log_softmax(-1)
    _synchronize(device)
    return sum(len(c) for _, c in pairs) / (time.perf_counter() - start)


def timing_figures(root: Path, device: str, quick: bool) -> dict:
    shape = dict(hidden=128, layers=2, heads=4, kv_heads=2, intermediate=256) if quick else \
        dict(hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864)
    folder = qwen2_style(root / "qwen2.5-0.5b-shape", model_vocab=151_936, **shape)
    batch, big_batch, new_tokens, prefill_batch = (8, 16, 16, 4) if quick else (64, 256, 256, 16)
    model, tokenizer = load_policy(folder)
    prompts = [encode_prompt(tokenizer, f"Sort the digits: {100 + i} and say why, at length.") for i in range(batch)]
    out = {"shape": shape, "vocab": model.config.vocab_size, "batch": batch, "big_batch": big_batch,
           "new_tokens": new_tokens,
           "prefill_batch": prefill_batch, "device": torch.cuda.get_device_name() if device.startswith("cuda") else device}
    bf16 = TorchBackend(model, compute_dtype=torch.bfloat16, eos_token_id=NO_EOS, device=device)
    _decode_tokens_per_s(bf16, prompts[:2], 4)  # warm-up: kernels, allocator
    out["decode_bf16"] = _decode_tokens_per_s(bf16, prompts, new_tokens)
    out["decode_bf16_big"] = _decode_tokens_per_s(bf16, (prompts * (big_batch // batch))[:big_batch], new_tokens)
    sampling = SamplingSpec(temperature=1.0, max_tokens=new_tokens)
    generate_rows = min(batch, 16)
    started = time.perf_counter()
    completions = bf16.generate(prompts[:generate_rows], sampling, list(range(generate_rows)))
    out["generate_bf16"] = sum(len(c.token_ids) for c in completions) / (time.perf_counter() - started)
    out["generate_rows"] = generate_rows
    pairs = [(p, c.token_ids) for p, c in zip(prompts, completions)] * (batch // generate_rows)
    del bf16, model
    for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        model, _ = load_policy(folder)
        backend = TorchBackend(model, compute_dtype=dtype, eos_token_id=NO_EOS, device=device)
        for kind, timed in (("prefill", _prefill_tokens_per_s), ("forward", _forward_tokens_per_s)):
            timed(backend, pairs[:prefill_batch], prefill_batch)  # warm-up
            out[f"{kind}_{name}"] = timed(backend, pairs, prefill_batch)
        del backend, model
    model, _ = load_policy(folder)
    cpu = TorchBackend(model, eos_token_id=NO_EOS)
    cpu_pairs = pairs[: max(2, prefill_batch // 4)]
    out["prefill_fp32_cpu"] = _prefill_tokens_per_s(cpu, cpu_pairs, len(cpu_pairs))
    out["cpu_threads"] = torch.get_num_threads()
    for name in ("prefill_bf16", "prefill_fp32", "prefill_fp32_cpu", "forward_bf16", "forward_fp32"):
        out[f"check_cost_fraction_{name}"] = round(out["decode_bf16"] / out[name], 4)
        out[f"check_cost_fraction_{name}_big"] = round(out["decode_bf16_big"] / out[name], 4)
    if device.startswith("cuda"):
        out["peak_gpu_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    print(json.dumps({"timing": out}), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="where the workers run (cuda; cpu only to try the script)")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run of the script)")
    parser.add_argument("--skip-noise", action="store_true")
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--families", default="qwen2,llama", help="fixture families of the noise part")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("bench.gpu: no CUDA device on this machine (--device cpu tries the script on the CPU)")
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_timing:
            result["timing"] = timing_figures(Path(tmp), args.device, args.quick)
        if not args.skip_noise:
            result["noise"] = noise_figures(Path(tmp), args.device, args.quick, args.families.split(","))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
