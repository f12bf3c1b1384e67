"""What the sampling rule costs a CPU worker and validator: `python -m bench.sampling [--threads N]`.

- `generate_tiny`: TorchBackend.generate tokens/s, the tiny in-code model (V 100), 64 rows × 48 tokens;
- `generate_llama_v32k`: the same for the Llama fixture of examples/hf_models.py (hidden 256, V 32,000), 16 rows
  × 32 tokens, no EOS;
- `noise_ns_per_value`: proofs.sampling.gumbel_noise, nanoseconds per noise value for [256, V] blocks (V 100 and
  32,000);
- `replay_ms_per_completion`: proofs.sampling.replay of one 256-token completion (V 100, T = 1, top-p 1).
Best of `--repeats` runs each. Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit
from examples.hf_models import llama_style
from inference.policy import load_policy
from inference.tiny import BOS_ID, build_char_tokenizer, build_tiny_llama
from inference.torch_backend import NO_EOS, TorchBackend
from proofs.sampling import gumbel_noise, replay, sample_tokens
from protocol.runspec import SamplingSpec


def _best(repeats: int, run) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def _generate_tokens_per_s(backend: TorchBackend, prompts: list[list[int]], max_tokens: int, repeats: int) -> float:
    spec = SamplingSpec(temperature=1.0, max_tokens=max_tokens)
    backend.generate(prompts[:2], spec, [0, 1])  # warm-up
    counts = []

    def run() -> None:
        counts.append(sum(len(c.token_ids) for c in backend.generate(prompts, spec, list(range(len(prompts))))))

    seconds = _best(repeats, run)
    return round(counts[-1] / seconds, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    add_record_option(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out: dict = {"threads": args.threads}
    tokenizer = build_char_tokenizer()
    tiny = TorchBackend(build_tiny_llama(len(tokenizer), 0, hidden=64, layers=2, lm_head_std=0.25,
                                         dtype=torch.bfloat16))
    prompts = [[BOS_ID, *tokenizer.encode(f"What is {i}+{i + 3}?")] for i in range(64)]
    out["generate_tiny"] = _generate_tokens_per_s(tiny, prompts, 48, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        model, _ = load_policy(llama_style(Path(tmp) / "llama", hidden=256))
        llama = TorchBackend(model, eos_token_id=NO_EOS)
        out["generate_llama_v32k"] = _generate_tokens_per_s(llama, [[1, 5, 6, 7, 8 + i] for i in range(16)], 32,
                                                             args.repeats)
    seeds, positions = torch.full((256,), 12345), torch.arange(256)
    out["noise_ns_per_value"] = {}
    for vocab in (100, 32_000):
        gumbel_noise(seeds, positions, vocab)
        seconds = _best(args.repeats, lambda: gumbel_noise(seeds, positions, vocab))  # noqa: B023
        out["noise_ns_per_value"][str(vocab)] = round(seconds / (256 * vocab) * 1e9, 2)
    logits = 2 * torch.randn(256, 100, generator=torch.Generator().manual_seed(0))
    tokens = sample_tokens(logits, seeds, positions, 1.0, 1.0).tolist()
    out["replay_ms_per_completion"] = round(1e3 * _best(args.repeats, lambda: replay(logits, tokens, 12345, 1.0, 1.0,
                                                                                        1e-3)), 3)
    emit(out, args, "sampling")


if __name__ == "__main__":
    exit_on_signals()
    main()
