"""GPU figures of sampling rule v2: identical noise bits on CPU and GPU, a worker's generation speed with the
rule and its proofs against plain on-device sampling and HF generate, what checking costs next to generating,
and honest CUDA-bf16 workers against the CPU and GPU validators with the attacks they must catch.

    python -m bench.gpu [--device cuda] [--quick] [--skip-noise] [--skip-timing]

`uniform_bits_equal`: the rule's uniforms w(s, i, v) for 10^7 random (seed, position, token) triples from the
fused Triton kernel and from torch integer ops on `--device`, against torch on the CPU, bit for bit
(`noise_max_abs_diff`: the largest float difference of g, within GUMBEL_TOLERANCE).

`timing` (a Qwen2.5-0.5B-shaped folder: hidden 896, 24 layers, 14 / 2 heads, V 151,936, random weights, bf16,
no EOS so every row makes `new_tokens`), tokens per second at 64 and 256 rows of
- `gen_tokens_per_s_R`: TorchBackend.generate (rule v2 on the device, logprobs, hidden capture) plus the
  TOPLOC proofs of its completions — what a worker produces;
- `plain_tokens_per_s_R`: the same decode loop with plain on-device sampling (torch.multinomial), no logprobs,
  no hidden capture, no proofs; `gen_ratio_R` = gen ÷ plain (target ≥ 0.9);
- `hf_tokens_per_s_R`: Hugging Face `generate(do_sample=True)` at the same batch; `hf_ratio_R` = gen ÷ hf;
- `check_fraction`: a GPU validator's (float32 reference on the device) seconds to verify the 256-row
  completions at q = 1 — prefill, replay, termination, TOPLOC, as inference.verify runs them — per
  second the worker spent generating them (target ≤ 0.02).

`noise` (fixture folders of examples/hf_models.py, hidden 256, V ≈ 32k): per family, CUDA-bf16 and CPU-bf16
workers' honest noise against the float32 CPU reference (validator.calibrate.measure), thresholds calibrated
from the device noise, then fresh honest CUDA-bf16 completions judged by the CPU validator and by a GPU
validator (`honest_false_positives`, target 0 of ≥ 1,000), and two attacks each validator must catch in
every completion: another model's weights (`cheat`) and the same weights perturbed by 1 % (`perturbed`:
adversaries.models.perturbed, as adversaries/workers.py's perturbed_weights).

Last line: one JSON object with at least uniform_bits_equal, gen_tokens_per_s_256, gen_ratio_256,
check_fraction, honest_false_positives, attacks_detected, attacks. `--device cpu --quick` runs the whole
script at toy sizes on a CPU (to try it before spending GPU time).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from adversaries.models import perturbed
from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit
from examples.hf_models import llama_style, qwen2_style
from inference.policy import load_policy, stop_token_ids
from inference.torch_backend import NO_EOS, TorchBackend
from inference.verify import CompletionRecord, verify_completions
from proofs import philox_triton
from proofs.sampling import GUMBEL_TOLERANCE, derive_seed, gumbel_noise, noise_words, uniforms_from_words
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
    return [CompletionRecord(prompt_ids=p, completion_ids=c.token_ids, proofs=pr, seed=c.seed,
                             finish_reason=c.finish_reason) for p, c, pr in zip(prompts, completions, proofs)]


def _rejected(validators: dict[str, TorchBackend], worker_folder: Path, stops, spec: RunSpec, device: str, n: int,
              batch: int, perturb: float = 0.0) -> dict:
    """Generate n fresh bf16 completions on `device` from `worker_folder`'s weights (each scaled by
    1 + perturb·N(0, 1)) and verify them with every validator; rejections and failed checks per validator."""
    worker_model, tokenizer = load_policy(worker_folder)
    if perturb:
        perturbed(worker_model, perturb)
    worker = TorchBackend(worker_model, compute_dtype=torch.bfloat16, eos_token_id=stops, device=device)
    task = build_task(spec.task)
    prompts = [encode_prompt(tokenizer, task.problem(1000 + i).prompt) for i in range(n)]
    seeds = [derive_seed(spec.pool_seed_bytes, WORKER, bytes(32), i) for i in range(n)]
    config = verify_config_of(spec)
    out = {name: {"completions": n, "rejected": 0, "failed_checks": {}} for name in validators}
    for start in range(0, n, batch):
        group, group_seeds = prompts[start:start + batch], seeds[start:start + batch]
        records = _records(worker, group, spec, group_seeds)
        for name, validator in validators.items():
            for verdict in verify_completions(validator, records, config, expected_prompts=group,
                                              expected_seeds=group_seeds):
                if not verdict.passed:
                    out[name]["rejected"] += 1
                    for check in verdict.failed:
                        out[name]["failed_checks"][check] = out[name]["failed_checks"].get(check, 0) + 1
    return out


def noise_figures(root: Path, device: str, quick: bool, families: list[str]) -> dict:
    spec = _spec(max_tokens=32 if quick else 64)
    prompts, batches, fresh, attack = (8, [1, 8], 16, 8) if quick else (32, [1, 8, 32], 512, 64)
    out = {}
    for family in families:
        build = {"qwen2": qwen2_style, "llama": llama_style}[family]
        folder = build(root / family, hidden=256)
        other = build(root / f"{family}-other", hidden=256, seed=1)
        started = time.perf_counter()
        on_device = measure(folder, spec, ["bfloat16"], batches, prompts, worker_device=device)
        on_cpu = measure(folder, spec, ["bfloat16"], batches, prompts, worker_device="cpu")
        calibrated = spec.model_copy(update={"verification": thresholds(on_device, spec.verification, 2.0, 4)})
        model, tokenizer = load_policy(folder)
        stops = stop_token_ids(model, tokenizer)
        validators = {"cpu_fp32": TorchBackend(model, eos_token_id=stops)}
        if device != "cpu":
            gpu_model, _ = load_policy(folder)
            validators[f"{device}_fp32"] = TorchBackend(gpu_model, eos_token_id=stops, device=device)
        out[family] = {
            "device_noise": _noise(on_device), "cpu_bf16_noise": _noise(on_cpu),
            "verification": calibrated.verification.model_dump(),
            "honest": _rejected(validators, folder, stops, calibrated, device, fresh, 64),
            "cheat": _rejected(validators, other, stops, calibrated, device, attack, 64),
            "perturbed": _rejected(validators, folder, stops, calibrated, device, attack, 64, perturb=0.01),
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(json.dumps({family: out[family]}), flush=True)
    return out


def _noise(noise) -> dict:
    return {"chunks": noise.chunks, "min_exp_matches": noise.min_exp_matches,
            "max_mant_err_mean": noise.max_mant_err_mean, "max_mant_err_median": noise.max_mant_err_median,
            "max_logit_diff": noise.max_logit_diff}


def uniform_agreement(device: str, triples: int) -> dict:
    """The rule's uniforms on `device` (Triton kernel and torch integer ops) against torch on the CPU."""
    rows = 16
    vocab = max(1, triples // (8 * rows))
    generator = torch.Generator().manual_seed(2026)
    equal, compared, noise_gap = True, 0, 0.0
    for _ in range(8):
        seeds = torch.randint(0, 2**63 - 1, (rows,), generator=generator)
        positions = torch.randint(0, 2**32 - 1, (rows,), generator=generator)
        cpu = uniforms_from_words(noise_words(seeds, positions, vocab))
        on_device = [uniforms_from_words(noise_words(seeds.to(device), positions.to(device), vocab)).cpu()]
        if torch.device(device).type == "cuda" and philox_triton.available():
            on_device.append(philox_triton.uniforms(seeds.to(device), positions.to(device), vocab).cpu())
        equal &= all(torch.equal(u.view(torch.int32), cpu.view(torch.int32)) for u in on_device)
        noise_gap = max(noise_gap, float((gumbel_noise(seeds.to(device), positions.to(device), vocab).cpu()
                                          - gumbel_noise(seeds, positions, vocab)).abs().max()))
        compared += rows * vocab
    return {"uniform_bits_equal": bool(equal), "uniform_triples": compared, "noise_max_abs_diff": noise_gap,
            "noise_within_tolerance": noise_gap <= GUMBEL_TOLERANCE,
            "implementations": ["torch-" + device] + (["triton"] if torch.device(device).type == "cuda"
                                                      and philox_triton.available() else [])}


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _left_padded(backend: TorchBackend, prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(input ids, attention mask) of `prompts` left-padded to one width, on the backend's device."""
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[backend.pad_token_id] * (width - len(p)) + p for p in prompts], device=backend.device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=backend.device)
    return ids, mask


@torch.inference_mode()
def _plain_tokens_per_s(backend: TorchBackend, prompts: list[list[int]], new_tokens: int) -> float:
    """TorchBackend.generate's decode loop with plain on-device sampling (multinomial of softmax(l / T)) and
    nothing else: no rule-v2 noise, logprobs, hidden capture or proofs."""
    from transformers import DynamicCache

    device = backend.device
    ids, mask = _left_padded(backend, prompts)
    _synchronize(device)
    start = time.perf_counter()
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    out = backend.decoder(input_ids=ids, attention_mask=mask, position_ids=positions,
                          cache=DynamicCache(config=backend.model.config), use_cache=True)
    position = positions[:, -1:] + 1
    ones = torch.ones((len(prompts), 1), dtype=mask.dtype, device=device)
    tokens = []
    for _ in range(new_tokens):
        probs = torch.softmax(backend.lm_head(out.last_hidden_state[:, -1]).float(), dim=-1)
        next_ids = torch.multinomial(probs, 1)
        tokens.append(next_ids)
        mask = torch.cat([mask, ones], dim=1)
        out = backend.decoder(input_ids=next_ids, attention_mask=mask, position_ids=position, cache=out.cache,
                              use_cache=True)
        position = position + 1
    torch.cat(tokens, dim=1).cpu()
    _synchronize(device)
    return len(prompts) * new_tokens / (time.perf_counter() - start)


@torch.inference_mode()
def _hf_tokens_per_s(backend: TorchBackend, prompts: list[list[int]], new_tokens: int) -> float:
    device = backend.device
    ids, mask = _left_padded(backend, prompts)
    _synchronize(device)
    start = time.perf_counter()
    backend.model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_p=1.0,
                           top_k=0, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                           pad_token_id=backend.pad_token_id)
    _synchronize(device)
    return len(prompts) * new_tokens / (time.perf_counter() - start)


def _worker_tokens_per_s(backend: TorchBackend, prompts: list[list[int]], sampling: SamplingSpec):
    """TorchBackend.generate plus the completions' TOPLOC proofs: (tokens/s, seconds, completions)."""
    _synchronize(backend.device)
    start = time.perf_counter()
    completions = backend.generate(prompts, sampling, list(range(len(prompts))))
    build_proofs_batch([c.hidden for c in completions], chunk=32)
    seconds = time.perf_counter() - start
    return sum(len(c.token_ids) for c in completions) / seconds, seconds, completions


def timing_figures(root: Path, device: str, quick: bool) -> dict:
    shape = dict(hidden=128, layers=2, heads=4, kv_heads=2, intermediate=256) if quick else \
        dict(hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864)
    folder = qwen2_style(root / "qwen2.5-0.5b-shape", model_vocab=151_936, **shape)
    row_counts, new_tokens = ((4, 8), 8) if quick else ((64, 256), 256)
    model, tokenizer = load_policy(folder)
    prompts = [encode_prompt(tokenizer, f"Sort the digits: {100 + i} and say why, at length.")
               for i in range(max(row_counts))]
    out = {"shape": shape, "vocab": model.config.vocab_size, "new_tokens": new_tokens, "rows": list(row_counts),
           "device": torch.cuda.get_device_name() if device.startswith("cuda") else device}
    worker = TorchBackend(model, compute_dtype=torch.bfloat16, eos_token_id=NO_EOS, device=device)
    sampling = SamplingSpec(temperature=1.0, max_tokens=new_tokens)
    warm = SamplingSpec(temperature=1.0, max_tokens=4)
    worker.generate(prompts[:2], warm, [0, 1])  # warm-up: kernels (Triton compiles once), allocator
    _plain_tokens_per_s(worker, prompts[:2], 4)
    completions = []
    for rows in row_counts:
        out[f"gen_tokens_per_s_{rows}"], gen_seconds, completions = _worker_tokens_per_s(worker, prompts[:rows],
                                                                                          sampling)
        out[f"plain_tokens_per_s_{rows}"] = _plain_tokens_per_s(worker, prompts[:rows], new_tokens)
        out[f"hf_tokens_per_s_{rows}"] = _hf_tokens_per_s(worker, prompts[:rows], new_tokens)
        out[f"gen_ratio_{rows}"] = round(out[f"gen_tokens_per_s_{rows}"] / out[f"plain_tokens_per_s_{rows}"], 3)
        out[f"hf_ratio_{rows}"] = round(out[f"gen_tokens_per_s_{rows}"] / out[f"hf_tokens_per_s_{rows}"], 3)
    del worker, model
    model, _ = load_policy(folder)
    validator = TorchBackend(model, eos_token_id=NO_EOS, device=device)  # float32 reference on the device
    spec = RunSpec(task=TaskSpec(name="sort", params={"min_digits": 3, "max_digits": 3}), pool_seed="0x" + "ab" * 32,
                   sampling=sampling)
    config = verify_config_of(spec).model_copy(update={"max_batch_tokens": 16_384 if device != "cpu" else 1024})
    proofs = build_proofs_batch([c.hidden for c in completions], chunk=32)
    records = [CompletionRecord(prompt_ids=p, completion_ids=c.token_ids, proofs=pr, seed=c.seed,
                                finish_reason=c.finish_reason)
               for p, c, pr in zip(prompts, completions, proofs)]
    verify_completions(validator, records[:2], config)  # warm-up
    _synchronize(validator.device)
    start = time.perf_counter()
    verdicts = verify_completions(validator, records, config)
    _synchronize(validator.device)
    check_seconds = time.perf_counter() - start
    out["check_seconds"] = round(check_seconds, 3)
    out["generate_seconds"] = round(gen_seconds, 3)
    out["check_fraction"] = round(check_seconds / gen_seconds, 4)
    out["checked_completions"] = len(records)
    out["checked_rejected"] = sum(not v.passed for v in verdicts)  # bf16 worker, untuned thresholds: informative
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
    add_record_option(parser)
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("bench.gpu: no CUDA device on this machine (--device cpu tries the script on the CPU)")
    result: dict = uniform_agreement(args.device, 10**5 if args.quick else 10**7)
    print(json.dumps(result), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_timing:
            timing = timing_figures(Path(tmp), args.device, args.quick)
            result["timing"] = timing
            for key in ("gen_tokens_per_s_256", "gen_ratio_256", "check_fraction"):
                if key in timing:
                    result[key] = timing[key]
            if args.quick:
                rows = max(timing["rows"])
                result.update(gen_tokens_per_s_256=None, gen_ratio_256=None,
                              quick_rows=rows, quick_gen_tokens_per_s=timing[f"gen_tokens_per_s_{rows}"],
                              quick_gen_ratio=timing[f"gen_ratio_{rows}"])
        if not args.skip_noise:
            noise = noise_figures(Path(tmp), args.device, args.quick, args.families.split(","))
            result["noise"] = noise
            result["honest_completions"] = sum(v["honest"][name]["completions"] for v in noise.values()
                                               for name in v["honest"])
            result["honest_false_positives"] = sum(v["honest"][name]["rejected"] for v in noise.values()
                                                   for name in v["honest"])
            result["attacks"] = sum(v[kind][name]["completions"] for v in noise.values()
                                    for kind in ("cheat", "perturbed") for name in v[kind])
            result["attacks_detected"] = sum(v[kind][name]["rejected"] for v in noise.values()
                                             for kind in ("cheat", "perturbed") for name in v[kind])
    emit(result, args, "gpu")


if __name__ == "__main__":
    exit_on_signals()
    main()
