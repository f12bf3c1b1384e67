"""Costs at real vocabulary sizes: a Qwen2-style checkpoint (examples/hf_models.py) at V = 32k and 152k.

    python -m bench.hf [--quick]

Each figure comes from a fresh subprocess, so its peak resident memory (ru_maxrss) is its own:
- `validator`: verify_completions (prefill in batches of VerifyConfig's max_batch_tokens, TOPLOC, sampling
  replay, termination) over `completions` × `tokens` — tokens/s and peak RSS;
- `replay`: proofs.sampling.replay alone, milliseconds per token (the part that grows with V);
- `trainer`: one forward + backward of the completion log-probabilities of a batch (trainer.batching,
  the memory-dominant path of the GRPO step), `batch` × `tokens` — tokens/s and peak RSS — in
  micro-batches of `--micro-batch-tokens` positions (default: TrainerConfig's; 0 = the whole batch in
  one pass), the log-probabilities in chunks (inference.logprobs), as the trainer computes them.
Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit

ROOT = Path(__file__).resolve().parent.parent


def _child(kind: str, folder: str, completions: int, tokens: int, threads: int, micro_batch_tokens: int = 0) -> dict:
    import torch

    from inference.policy import load_policy, stop_token_ids
    from inference.torch_backend import NO_EOS, TorchBackend
    from inference.verify import CompletionRecord, VerifyConfig, verify_completions
    from proofs.sampling import replay
    from proofs.toploc import build_proofs_batch
    from protocol.runspec import SamplingSpec
    from tasks.encoding import encode_prompt
    from trainer.batching import completion_logprobs, micro_batches, pack

    torch.set_num_threads(threads)
    model, tokenizer = load_policy(Path(folder))
    sampling = SamplingSpec(temperature=1.0, max_tokens=tokens)
    prompts = [encode_prompt(tokenizer, f"Sort the digits: {100 + i}") for i in range(completions)]
    worker = TorchBackend(model, eos_token_id=NO_EOS, pad_token_id=tokenizer.pad_token_id)
    generated = worker.generate(prompts, sampling, list(range(completions)))
    n_tokens = sum(len(c.token_ids) for c in generated)
    start = time.perf_counter()
    if kind == "validator":
        proofs = build_proofs_batch([c.hidden for c in generated], chunk=32)
        records = [CompletionRecord(prompt_ids=p, completion_ids=c.token_ids, proofs=pr, seed=c.seed,
                                    finish_reason=c.finish_reason) for p, c, pr in zip(prompts, generated, proofs)]
        reference = TorchBackend(load_policy(Path(folder))[0], eos_token_id=stop_token_ids(model, tokenizer))
        start = time.perf_counter()
        verdicts = verify_completions(reference, records, VerifyConfig(sampling=sampling, chunk=32))
        assert all(v.check("sampling").passed for v in verdicts)
    elif kind == "replay":
        prefill = worker.prefill(prompts[0], generated[0].token_ids)
        start = time.perf_counter()
        replay(prefill.logits, generated[0].token_ids, generated[0].seed, 1.0, 1.0, 1e-3)
        n_tokens = len(generated[0].token_ids)
    elif kind == "trainer":
        model.train()
        batch = pack(prompts, [c.token_ids for c in generated], tokenizer.pad_token_id or 0)
        start = time.perf_counter()
        for rows in micro_batches(batch, micro_batch_tokens or batch.inputs.numel()):
            micro = batch.rows(rows)
            logp = completion_logprobs(model, micro, 1.0)
            (logp * micro.loss_mask).sum().backward()
    seconds = time.perf_counter() - start
    return {"kind": kind, "tokens": n_tokens, "seconds": seconds, "tokens_per_s": n_tokens / seconds,
            "ms_per_token": 1000 * seconds / n_tokens,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _measure(kind: str, folder: Path, completions: int, tokens: int, threads: int, micro_batch_tokens: int) -> dict:
    code = (f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); from bench.hf import _child; "
            f"print(json.dumps(_child({kind!r}, {str(folder)!r}, {completions}, {tokens}, {threads}, "
            f"{micro_batch_tokens})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter completions")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--micro-batch-tokens", type=int, default=None,
                        help="trainer figure: positions per forward/backward (default TrainerConfig's; 0 = whole batch)")
    add_record_option(parser)
    args = parser.parse_args()
    from trainer.config import TrainerConfig

    micro_batch_tokens = TrainerConfig().micro_batch_tokens if args.micro_batch_tokens is None else args.micro_batch_tokens
    from examples.hf_models import qwen2_style

    completions, tokens = (4, 32) if args.quick else (16, 64)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for vocab in (32_768, 152_064):
            folder = qwen2_style(Path(tmp) / f"v{vocab}", vocab=32_768, model_vocab=vocab)
            for kind in ("validator", "replay", "trainer"):
                r = _measure(kind, folder, completions, tokens, args.threads, micro_batch_tokens)
                results[f"{kind}_v{vocab}"] = r
                print(f"V={vocab:>7}  {kind:<9}  {r['tokens']:>5} tokens  {r['tokens_per_s']:>9.1f} tok/s  "
                      f"{r['ms_per_token']:>8.3f} ms/token  peak RSS {r['peak_rss_mib']:>7.0f} MiB", flush=True)
    emit({"completions": completions, "tokens": tokens, "threads": args.threads,
          "micro_batch_tokens": micro_batch_tokens, **results}, args, "hf")


if __name__ == "__main__":
    exit_on_signals()
    main()
