"""What batching the prefill across files would give the validator: `python -m bench.prefill_batching [--quick]`.

The checker processes get one file at a time, so each file's spot-checked completions are prefilled in
batches of their own. This measures `verify_completions` on the spot-checked completions of `files` files
of the run-spot shape (m = 7 completions of 256 tokens each at q = 5 %, the tiny policy of bench.validator:
hidden 64, 2 layers, V = 100), one torch thread, two ways, at several `max_batch_tokens`:
- per_file: one call per file (what the checker does);
- across_files: one call for all the files' completions (what batching files of one step would do).
Each figure is the best of `repeats` runs. Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import time

import torch

from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit
from inference.tiny import BOS_ID, build_char_tokenizer, build_tiny_llama
from inference.torch_backend import NO_EOS, TorchBackend
from inference.verify import FP32_THRESHOLDS, CompletionRecord, VerifyConfig, verify_completions
from proofs.toploc import build_proofs_batch
from protocol.runspec import SamplingSpec


def _records(backend: TorchBackend, n: int, max_tokens: int) -> list[CompletionRecord]:
    tokenizer = build_char_tokenizer()
    prompts = [[BOS_ID, *tokenizer.encode(f"Sort the digits: {100 + i}")] for i in range(n)]
    completions = backend.generate(prompts, SamplingSpec(temperature=1.0, max_tokens=max_tokens), list(range(n)))
    proofs = build_proofs_batch([c.hidden for c in completions], chunk=32)
    return [CompletionRecord(prompt_ids=p, completion_ids=c.token_ids, proofs=pr, seed=c.seed,
                             finish_reason=c.finish_reason)
            for p, c, pr in zip(prompts, completions, proofs)]


def _best_seconds(run, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 files, 2 repeats")
    parser.add_argument("--files", type=int)
    parser.add_argument("--per-file", type=int, default=7, help="spot-checked completions per file")
    parser.add_argument("--max-tokens", type=int, default=256)
    add_record_option(parser)
    args = parser.parse_args()
    files, repeats = (args.files or 4, 2) if args.quick else (args.files or 8, 3)
    torch.set_num_threads(1)
    tokenizer = build_char_tokenizer()
    backend = TorchBackend(build_tiny_llama(len(tokenizer), 0, hidden=64, layers=2, heads=4), eos_token_id=NO_EOS)
    records = _records(backend, files * args.per_file, args.max_tokens)
    by_file = [records[f * args.per_file:(f + 1) * args.per_file] for f in range(files)]
    tokens = sum(len(r.completion_ids) for r in records)
    rows = []
    for budget in (256, 1024, 4096, 10**6):
        config = VerifyConfig(sampling=SamplingSpec(temperature=1.0, max_tokens=args.max_tokens),
                              thresholds=FP32_THRESHOLDS, chunk=32, max_batch_tokens=budget)
        per_file = _best_seconds(lambda: [verify_completions(backend, f, config) for f in by_file], repeats)
        across = _best_seconds(lambda: verify_completions(backend, records, config), repeats)
        rows.append({"max_batch_tokens": budget, "per_file_s": round(per_file / files, 4),
                     "across_files_s": round(across / files, 4), "speedup": round(per_file / across, 3),
                     "per_file_tokens_per_s": round(tokens / per_file), "across_files_tokens_per_s": round(tokens / across)})
        print(f"max_batch_tokens {budget:>7}: per file {per_file / files:.4f} s/file, across files "
              f"{across / files:.4f} s/file, speedup {per_file / across:.3f}", flush=True)
    emit({"files": files, "per_file": args.per_file, "max_tokens": args.max_tokens, "rows": rows}, args,
         "prefill_batching")


if __name__ == "__main__":
    exit_on_signals()
    main()
