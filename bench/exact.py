"""Exact mode (docs/protocol.md §5.1) on the tiny in-code model: `python -m bench.exact [--completions N]`.

- `bitwise_equal_fraction` (`bitwise_s` the seconds it took): of N honest completions (T = 1, generated 64 rows at a time on one thread), the
  fraction whose every Q16 logit and token is the same when the completion is recomputed by one full prefill, by
  a generation on two threads, and by a generation in a batch of 1, 3 or 17 rows (each completion one of those);
- `cpu_tokens_per_s_ratio`: exact-mode generation over float32 `TorchBackend` generation, the same model, prompts
  and token count (64 rows × `--tokens`, no EOS, one thread), best of `--repeats` each, in the same run;
  `large.cpu_tokens_per_s_ratio` the same for a larger in-code Llama (hidden 256, 4 layers, V 32,000; 64 rows ×
  `--large-tokens`);
- `attacks`, `attacks_changing_first_file`, `attacks_caught_first_file`, `attacks_caught_first_changed_file`,
  `changed_file` and `tokens_to_detect` (per attack) and `tokens_to_detect_median`: each attack makes files
  (`--file-rows` completions of up to `--tokens` tokens, prompts and seeds of their own) until one is caught, at
  most `--max-files`; the validator replays every token with the honest integer policy and tolerance zero
  (`inference.exact.first_deviation`). An attack that changes no token of a file makes exactly the honest file
  (nothing to catch, nothing learnt from it): `changed_file` is the first file whose tokens differ from the
  honest file's, and an attack counts as caught in the first file it changes when that file is caught. Tokens to
  detect counts the tokens checked up to and including the first that is not the rule's draw, earlier files'
  tokens included. ε = 0.03 (a bf16 pool's tolerance) sizes the biases and the steering;
- `before` (with `--before REV`): the same speed figures for inference/exact.py as of git revision REV, timed in
  the same rounds (it must compute the same integers);
- `gpu_tokens_per_s_ratio`: null, with `null_reasons`; `steps_ratio`: null unless measured (below).

`--learning SEEDS` (e.g. `0,1,2`) measures instead the learning figure, and only it: for each seed the CPU recipe
(examples/cpu_run.py, `run_async`: async level 2, one worker process) once with float rollouts and once with
exact-mode rollouts (the worker samples from each policy's integer form, the trainer takes logp_behav from it),
float then exact seed by seed; `steps_to_target` per run (null: missed within `--learning-minutes` of RL), their
medians and `steps_ratio` = median exact / median float (a missed run counts as more steps than any reached one; a
median that is a miss leaves the ratio null). Record it as a profile: `--learning 0,1,2 --record learning`.
Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory
from types import ModuleType

import torch

from bench.report import add_record_option, emit
from examples.cpu_run import CpuRecipe, run_async
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


def tokens_per_s_ratio(model: torch.nn.Module, policy: exact.ExactPolicy, tokens: int, repeats: int,
                       before: ModuleType | None = None) -> dict:
    """Exact over float32 generation speed, one thread, best of `repeats` each, interleaved; `before` (an older
    inference.exact) is timed in the same rounds, and must draw the same tokens and logits."""
    torch.set_num_threads(1)
    prompts = _prompts(64, 2)
    backend = TorchBackend(model, eos_token_id=NO_EOS)
    spec = SamplingSpec(temperature=1.0, max_tokens=tokens)
    runs: dict[str, Callable[[], object]] = {
        "exact": lambda: exact.generate(policy, prompts, range(64), 1.0, tokens, []),
        "float32": lambda: backend.generate(prompts, spec, list(range(64)))}
    if before is not None:
        old_policy = before.quantise_policy(model)
        runs["before"] = lambda: before.generate(old_policy, prompts, range(64), 1.0, tokens, [])
        if any(new.token_ids != old.token_ids or not torch.equal(new.logits, old.logits)
               for new, old in zip(runs["exact"](), runs["before"]())):
            raise SystemExit("error: --before computes other integers than this checkout")
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    rates = {name: 64 * tokens / seconds for name, seconds in best.items()}
    result = {"exact_tokens_per_s": round(rates["exact"], 1), "float32_tokens_per_s": round(rates["float32"], 1),
              "cpu_tokens_per_s_ratio": round(rates["exact"] / rates["float32"], 3)}
    if before is not None:
        result["before"] = {"exact_tokens_per_s": round(rates["before"], 1),
                            "cpu_tokens_per_s_ratio": round(rates["before"] / rates["float32"], 3)}
    return result


def load_before(revision: str) -> ModuleType:
    """inference/exact.py as of `revision` (git), loaded beside the current one."""
    try:
        source = subprocess.run(["git", "show", f"{revision}:inference/exact.py"], capture_output=True, text=True,
                                check=True, cwd=Path(__file__).resolve().parents[1]).stdout
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit(f"error: --before {revision}: no inference/exact.py at that git revision") from None
    module = ModuleType("exact_before")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{revision}:inference/exact.py", "exec"), module.__dict__)
    return module


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


Make = Callable[[list[list[int]], list[int]], list[exact.ExactCompletion]]


def attack_files(honest: exact.ExactPolicy, rows: int, tokens: int, max_files: int) -> dict[str, dict]:
    """Each attack's files, replayed with tolerance zero, until one is caught (at most `max_files`): file f has
    `rows` prompts and seeds of its own, and the same file made honestly is the comparison. Per attack: the first
    file whose tokens differ from the honest file's (`changed_file`, 1-based; None: none in `max_files`), the first
    file caught (`caught_file`), and the tokens the validator checked up to and including the first deviation
    (`tokens_to_detect`, earlier files' tokens included)."""
    perturbed = _model(0)
    with torch.no_grad():
        perturbed.model.layers[1].mlp.down_proj.weight.mul_(1.01)
    other, coarse, off = exact.quantise_policy(_model(1)), _int4(honest), exact.quantise_policy(perturbed)

    def made(policy: exact.ExactPolicy, temperature: float = 1.0, draw: exact.Draw | None = None,
             seed_offset: int = 0) -> Make:
        return lambda prompts, seeds: exact.generate(policy, prompts, [s + seed_offset for s in seeds], temperature,
                                                     tokens, [EOS_ID], draw=draw)

    attacks: dict[str, Make] = {
        "honest (control)": made(honest),
        "other weights": made(other),
        "int4 weights": made(coarse),
        "1 % on one layer": made(off),
        "T x 0.95": made(honest, temperature=0.95),
        "answer bias 1.9 eps": made(honest, draw=_biased(1.9 * EPSILON)),
        "answer bias 0.5 eps": made(honest, draw=_biased(0.5 * EPSILON)),
        "steering among near-ties": made(honest, draw=_steering),
        "top-p 0.9": made(honest, draw=_top_p),
        "seed from another block": made(honest, seed_offset=7919),
    }
    files: list[tuple[list[list[int]], list[int], list[exact.ExactCompletion]]] = []

    def file(index: int) -> tuple[list[list[int]], list[int], list[exact.ExactCompletion]]:
        while len(files) <= index:
            prompts = _prompts(rows, 3 + 1000 * len(files))
            seeds = list(range(1000 + rows * len(files), 1000 + rows * (len(files) + 1)))
            files.append((prompts, seeds, attacks["honest (control)"](prompts, seeds)))
        return files[index]

    found: dict[str, dict] = {}
    for name, make in attacks.items():
        result = found[name] = {"changed_file": None, "caught_file": None, "tokens_to_detect": None}
        counted = 0
        for index in range(1 if name == "honest (control)" else max_files):
            prompts, seeds, honest_file = file(index)
            completions = honest_file if name == "honest (control)" else make(prompts, seeds)
            if result["changed_file"] is None and any(
                    a.token_ids != b.token_ids for a, b in zip(completions, honest_file)):
                result["changed_file"] = index + 1
            for prompt, seed, completion in zip(prompts, seeds, completions):
                first = exact.first_deviation(honest, prompt, completion.token_ids, seed, 1.0)
                if first is not None:
                    result["caught_file"], result["tokens_to_detect"] = index + 1, counted + first + 1
                    break
                counted += len(completion.token_ids)
            if result["caught_file"] is not None:
                break
    return found


def median_steps(steps: list[int | None]) -> int | float | None:
    """The median of runs' steps to target, a miss (None) ranking above every reached run; None when it is a miss."""
    ranked = sorted(steps, key=lambda s: (s is None, s or 0))
    middle = ranked[(len(ranked) - 1) // 2: len(ranked) // 2 + 1]
    return None if None in middle else statistics.median(middle)


def learning_figures(steps: dict[str, list[int | None]]) -> dict:
    """Medians of `steps` ({"float": [...], "exact": [...]}, the same seeds in order) and their ratio."""
    medians = {mode: median_steps(runs) for mode, runs in steps.items()}
    ratio = None if None in medians.values() else round(medians["exact"] / medians["float"], 3)
    figures = {"steps_to_target": steps, "median_steps": medians, "steps_ratio": ratio}
    if ratio is None:
        missed = [mode for mode, median in medians.items() if median is None]
        figures["null_reasons"] = {"steps_ratio": f"the median {' and '.join(missed)} run missed the target"}
    return figures


def learning(seeds: list[int], minutes: float) -> dict:
    """The learning figure (module docstring): the recipe's float and exact runs for each seed."""
    torch.set_num_threads(1)
    steps: dict[str, list[int | None]] = {"float": [], "exact": []}
    rl_s: dict[str, list[float]] = {"float": [], "exact": []}
    with TemporaryDirectory(prefix="bench-exact-") as tmp:
        for seed in seeds:
            for mode in steps:
                spec = CpuRecipe(seed=seed, inference=mode, budget_s=minutes * 60)
                result = run_async(spec, Path(tmp) / f"{mode}-{seed}", async_level=2, workers=1, log=True)
                steps[mode].append(result.steps_to_target)
                rl_s[mode].append(result.rl_s)
                print(f"[{mode} seed {seed}] steps to target {result.steps_to_target}, {result.rl_s} s of RL, "
                      f"accuracy {result.accuracy_end}", flush=True)
    recipe = CpuRecipe()
    return {"recipe": {"task": recipe.task.name, "target": recipe.target, "target_window": recipe.target_window,
                       "eval_every": recipe.eval_every, "lr": recipe.lr, "async_level": 2, "workers": 1},
            "seeds": seeds, "learning_minutes": minutes, **learning_figures(steps), "rl_s": rl_s}


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds are comma-separated integers, got {text!r}") from None
    if any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"seeds must be distinct and >= 0, got {text!r}")
    return seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=256, help="honest completions for bitwise_equal_fraction")
    parser.add_argument("--tokens", type=int, default=32, help="tokens per completion")
    parser.add_argument("--file-rows", type=int, default=16, help="completions in each attack's file")
    parser.add_argument("--max-files", type=int, default=32,
                        help="files made per attack until one is caught (an attack that changes no token of a file "
                             "makes the honest file)")
    parser.add_argument("--large-tokens", type=int, default=8, help="tokens per completion on the larger model")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", metavar="REV",
                        help="also time inference/exact.py as of this git revision in the same rounds (before/after)")
    parser.add_argument("--learning", type=_seeds, metavar="SEEDS",
                        help="measure only steps_ratio: the CPU recipe, float and exact rollouts, for each seed")
    parser.add_argument("--learning-minutes", type=float, default=60.0,
                        help="RL budget of each learning run (the recipe's clock, evaluation excluded)")
    add_record_option(parser)
    args = parser.parse_args()
    if args.learning is not None:
        if args.learning_minutes <= 0:
            parser.error(f"--learning-minutes must be > 0, got {args.learning_minutes}")
        emit(learning(args.learning, args.learning_minutes), args, "exact")
        return
    before = load_before(args.before) if args.before else None
    model = _model(0)
    honest = exact.quantise_policy(model)
    speed = tokens_per_s_ratio(model, honest, args.tokens, args.repeats, before)
    large = build_tiny_llama(32000, 0, hidden=256, layers=4, lm_head_std=0.1)
    large_speed = tokens_per_s_ratio(large, exact.quantise_policy(large), args.large_tokens, args.repeats, before)
    found = attack_files(honest, args.file_rows, args.tokens, args.max_files)
    control = found.pop("honest (control)")
    start = time.perf_counter()
    bitwise = round(bitwise_equal_fraction(honest, args.completions, args.tokens), 6)
    bitwise_s = round(time.perf_counter() - start, 1)
    detected = [attack["tokens_to_detect"] for attack in found.values() if attack["tokens_to_detect"] is not None]
    result = {
        "model": "tiny Llama (hidden 64, 2 layers, V 100)", "policy_digest": honest.digest(),
        "completions": args.completions, "tokens": args.tokens,
        "bitwise_equal_fraction": bitwise, "bitwise_s": bitwise_s,
        **speed, "large": {"model": "Llama hidden 256, 4 layers, V 32,000", **large_speed},
        "attacks": len(found),
        "attacks_changing_first_file": sum(attack["changed_file"] == 1 for attack in found.values()),
        "attacks_caught_first_file": sum(attack["caught_file"] == 1 for attack in found.values()),
        "attacks_caught_first_changed_file": sum(attack["changed_file"] is not None
                                                 and attack["caught_file"] == attack["changed_file"]
                                                 for attack in found.values()),
        "honest_file_flagged": control["caught_file"] is not None,
        "changed_file": {name: attack["changed_file"] for name, attack in found.items()},
        "tokens_to_detect": {name: attack["tokens_to_detect"] for name, attack in found.items()},
        "tokens_to_detect_median": statistics.median(detected) if detected else None,
        "gpu_tokens_per_s_ratio": None, "steps_ratio": None,
        "null_reasons": {"gpu_tokens_per_s_ratio": "no GPU measured: the CUDA path is written, not yet run",
                         "steps_ratio": "not measured in this run: `--learning SEEDS` measures it (an hour of CPU "
                                        "learning runs), docs/notes/exact.md has the figures"},
    }
    emit(result, args, "exact")


if __name__ == "__main__":
    main()
