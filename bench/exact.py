"""Exact mode (docs/protocol.md §5.1) on the tiny in-code model: `python -m bench.exact [--completions N]`.

- `bitwise_equal_fraction`: of N honest completions (T = 1, generated 64 rows at a time on one thread), the
  fraction whose every Q16 logit and token is the same when the completion is recomputed by one full prefill, by
  a generation on two threads, and by a generation in a batch of 1, 3 or 17 rows (each completion one of those);
- `cpu_tokens_per_s_ratio`: exact-mode generation over float32 `TorchBackend` generation, the same model, prompts
  and token count (64 rows × `--tokens`, no EOS, one thread), best of `--repeats` each, in the same run;
  `large.cpu_tokens_per_s_ratio` the same for a larger in-code Llama (hidden 256, 4 layers, V 32,000; 64 rows ×
  `--large-tokens`);
- `attacks`, `attacks_caught_first_file`, `tokens_to_detect` (per attack) and `tokens_to_detect_median`: each
  attack makes one file (`--file-rows` completions of up to `--tokens` tokens); the validator replays every token
  with the honest integer policy and tolerance zero (`inference.exact.first_deviation`); tokens to detect counts
  the file's tokens up to and including the first that is not the rule's draw. ε = 0.03 (a bf16 pool's
  tolerance) sizes the biases and the steering;
- `gpu_tokens_per_s_ratio` and `steps_ratio`: null, with `null_reasons`.
Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

import torch

from bench.report import add_record_option, emit
from inference import exact
from inference.tiny import BOS_ID, EOS_ID, build_char_tokenizer, build_tiny_llama
from inference.torch_backend import NO_EOS, TorchBackend
from proofs.sampling import noise_words
from protocol.runspec import SamplingSpec

EPSILON = 0.03
"""A bf16 pool's calibrated logit tolerance (docs/protocol.md R5.4): what float mode would let through."""
PREFERRED = list(range(4, 14))
"""The digit tokens of the character tokenizer: the 'answer' a biased or steering worker favours."""


def _model(seed: int) -> torch.nn.Module:
    return build_tiny_llama(len(build_char_tokenizer()), seed, hidden=64, layers=2, lm_head_std=0.25)


def _prompts(count: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[BOS_ID] + [rng.randrange(4, 90) for _ in range(rng.randrange(4, 17))] for _ in range(count)]


def bitwise_equal_fraction(policy: exact.ExactPolicy, completions: int, tokens: int) -> float:
    prompts, seeds = _prompts(completions, 1), list(range(completions))
    torch.set_num_threads(1)
    base = _in_batches(policy, prompts, seeds, tokens, [64])
    torch.set_num_threads(2)
    two_threads = _in_batches(policy, prompts, seeds, tokens, [64])
    torch.set_num_threads(1)
    small_batches = _in_batches(policy, prompts, seeds, tokens, [1, 3, 17])
    equal = 0
    for row, completion in enumerate(base):
        prefill = exact.prefill_logits(policy, prompts[row], completion.token_ids)
        equal += all(other.token_ids == completion.token_ids and torch.equal(other.logits, completion.logits)
                     for other in (two_threads[row], small_batches[row])) and torch.equal(prefill, completion.logits)
    return equal / completions


def _in_batches(policy: exact.ExactPolicy, prompts: list[list[int]], seeds: list[int], tokens: int,
                sizes: list[int]) -> list[exact.ExactCompletion]:
    out: list[exact.ExactCompletion] = []
    while len(out) < len(prompts):
        begin, size = len(out), sizes[len(out) % len(sizes)]
        out += exact.generate(policy, prompts[begin:begin + size], seeds[begin:begin + size], 1.0, tokens, [EOS_ID])
    return out


def tokens_per_s_ratio(model: torch.nn.Module, policy: exact.ExactPolicy, tokens: int, repeats: int) -> dict:
    """Exact over float32 generation speed, one thread, best of `repeats` each, interleaved."""
    torch.set_num_threads(1)
    prompts = _prompts(64, 2)
    backend = TorchBackend(model, eos_token_id=NO_EOS)
    spec = SamplingSpec(temperature=1.0, max_tokens=tokens)
    best = {"exact": float("inf"), "float32": float("inf")}
    for _ in range(repeats):
        for name, run in (("exact", lambda: exact.generate(policy, prompts, range(64), 1.0, tokens, [])),
                          ("float32", lambda: backend.generate(prompts, spec, list(range(64))))):
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    rates = {name: 64 * tokens / seconds for name, seconds in best.items()}
    return {"exact_tokens_per_s": round(rates["exact"], 1), "float32_tokens_per_s": round(rates["float32"], 1),
            "cpu_tokens_per_s_ratio": round(rates["exact"] / rates["float32"], 3)}


def _biased(bias: float) -> Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]:
    def draw(logits: torch.Tensor, seeds: torch.Tensor, position: int) -> torch.Tensor:
        shifted = logits.clone()
        shifted[:, PREFERRED] += round(bias * 2**exact.FRAC)
        return exact.sample_fixed(shifted, seeds, position, 1.0)

    return draw


def _steering(logits: torch.Tensor, seeds: torch.Tensor, position: int) -> torch.Tensor:
    """Among the tokens whose score is within float mode's bound 2ε/T of the best, a digit if there is one."""
    noise = exact.fixed_gumbel(noise_words(seeds, torch.full_like(seeds, position), logits.shape[-1]))
    scores = logits + noise
    admitted = scores >= scores.amax(dim=-1, keepdim=True) - round(2 * EPSILON * 2**exact.FRAC)
    preferred = torch.zeros_like(admitted)
    preferred[:, PREFERRED] = True
    steered = (admitted & preferred).any(dim=-1)
    return torch.where(steered, scores.masked_fill(~(admitted & preferred), -2**62).argmax(dim=-1),
                       scores.argmax(dim=-1))


def _top_p(logits: torch.Tensor, seeds: torch.Tensor, position: int) -> torch.Tensor:
    """The rule restricted to the 0.9 nucleus of softmax(l)."""
    probs = torch.softmax(logits.double() / 2**exact.FRAC, dim=-1)
    ordered, order = probs.sort(dim=-1, descending=True)
    outside = (ordered.cumsum(dim=-1) - ordered) >= 0.9
    masked = logits.clone()
    masked.scatter_(-1, order, torch.where(outside, -2**40, logits.gather(-1, order)))
    return exact.sample_fixed(masked, seeds, position, 1.0)


def _int4(policy: exact.ExactPolicy) -> exact.ExactPolicy:
    """Every int8 weight rounded to a multiple of 16 (16 levels: 4 bits)."""
    def coarse(matrix: exact.IntMatrix) -> exact.IntMatrix:
        weight = torch.clamp(exact.rdiv(matrix.weight.long(), 16) * 16, -127, 127).to(torch.int8)
        return exact.IntMatrix(weight, matrix.multiplier, matrix.shift, matrix.bias)

    layers = tuple(replace(layer, **{name: coarse(getattr(layer, name)) for name in exact.MATRICES})
                   for layer in policy.layers)
    return replace(policy, layers=layers, lm_head=coarse(policy.lm_head))


def attack_files(honest: exact.ExactPolicy, rows: int, tokens: int) -> dict[str, int | None]:
    """Tokens to the first detection in one file per attack (None: the file passed)."""
    perturbed = _model(0)
    with torch.no_grad():
        perturbed.model.layers[1].mlp.down_proj.weight.mul_(1.01)
    prompts, seeds = _prompts(rows, 3), list(range(1000, 1000 + rows))
    attacks: dict[str, Callable[[], list[exact.ExactCompletion]]] = {
        "honest (control)": lambda: exact.generate(honest, prompts, seeds, 1.0, tokens, [EOS_ID]),
        "other weights": lambda: exact.generate(exact.quantise_policy(_model(1)), prompts, seeds, 1.0, tokens, [EOS_ID]),
        "int4 weights": lambda: exact.generate(_int4(honest), prompts, seeds, 1.0, tokens, [EOS_ID]),
        "1 % on one layer": lambda: exact.generate(exact.quantise_policy(perturbed), prompts, seeds, 1.0, tokens,
                                                   [EOS_ID]),
        "T x 0.95": lambda: exact.generate(honest, prompts, seeds, 0.95, tokens, [EOS_ID]),
        "answer bias 1.9 eps": lambda: exact.generate(honest, prompts, seeds, 1.0, tokens, [EOS_ID],
                                                      draw=_biased(1.9 * EPSILON)),
        "answer bias 0.5 eps": lambda: exact.generate(honest, prompts, seeds, 1.0, tokens, [EOS_ID],
                                                      draw=_biased(0.5 * EPSILON)),
        "steering among near-ties": lambda: exact.generate(honest, prompts, seeds, 1.0, tokens, [EOS_ID],
                                                           draw=_steering),
        "top-p 0.9": lambda: exact.generate(honest, prompts, seeds, 1.0, tokens, [EOS_ID], draw=_top_p),
        "seed from another block": lambda: exact.generate(honest, prompts, [s + 7919 for s in seeds], 1.0, tokens,
                                                          [EOS_ID]),
    }
    found: dict[str, int | None] = {}
    for name, make_file in attacks.items():
        counted, found[name] = 0, None
        for prompt, seed, completion in zip(prompts, seeds, make_file()):
            first = exact.first_deviation(honest, prompt, completion.token_ids, seed, 1.0)
            if first is not None:
                found[name] = counted + first + 1
                break
            counted += len(completion.token_ids)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=256, help="honest completions for bitwise_equal_fraction")
    parser.add_argument("--tokens", type=int, default=32, help="tokens per completion")
    parser.add_argument("--file-rows", type=int, default=16, help="completions in each attack's file")
    parser.add_argument("--large-tokens", type=int, default=8, help="tokens per completion on the larger model")
    parser.add_argument("--repeats", type=int, default=3)
    add_record_option(parser)
    args = parser.parse_args()
    model = _model(0)
    honest = exact.quantise_policy(model)
    speed = tokens_per_s_ratio(model, honest, args.tokens, args.repeats)
    large = build_tiny_llama(32000, 0, hidden=256, layers=4, lm_head_std=0.1)
    large_speed = tokens_per_s_ratio(large, exact.quantise_policy(large), args.large_tokens, args.repeats)
    found = attack_files(honest, args.file_rows, args.tokens)
    control = found.pop("honest (control)")
    detected = [tokens for tokens in found.values() if tokens is not None]
    result = {
        "model": "tiny Llama (hidden 64, 2 layers, V 100)", "policy_digest": honest.digest(),
        "completions": args.completions, "tokens": args.tokens,
        "bitwise_equal_fraction": round(bitwise_equal_fraction(honest, args.completions, args.tokens), 6),
        **speed, "large": {"model": "Llama hidden 256, 4 layers, V 32,000", **large_speed},
        "attacks": len(found), "attacks_caught_first_file": len(detected), "honest_file_flagged": control is not None,
        "tokens_to_detect": found, "tokens_to_detect_median": statistics.median(detected) if detected else None,
        "gpu_tokens_per_s_ratio": None, "steps_ratio": None,
        "null_reasons": {"gpu_tokens_per_s_ratio": "no GPU measured: the CUDA path is written, not yet run",
                         "steps_ratio": "the trainer does not learn from exact-mode rollouts yet"},
    }
    emit(result, args, "exact")


if __name__ == "__main__":
    main()
