"""TOPLOC benchmark and the attack & honesty suite.

    python -m bench.toploc [--quick]

Prints proof size, prover overhead (generation with vs without proofs, same run), verification
speedup (generation wall time / verification wall time) and verification tokens/s for a model of
a few million parameters and completions of >= 256 tokens; then the confusion matrix of the
attack & honesty suite (adversaries/toploc.py; tests/integration/test_toploc_attacks.py runs the same
suite). Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import time

import torch

from adversaries.toploc import POOL_SEED, WORKER, SuiteSetup, confusion, format_suite, run_suite
from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit
from inference.torch_backend import NO_EOS, TorchBackend
from inference.verify import FP32_THRESHOLDS, CompletionRecord, verify_completions
from proofs.sampling import derive_seed
from proofs.toploc import PAPER_THRESHOLDS, build_proofs_batch
from protocol.runspec import SamplingSpec

# ---- performance ----------------------------------------------------------------------------


def measure_performance(
    hidden: int, layers: int, batch: int, tokens: int, repeats: int
) -> dict[str, float]:
    """Generation with and without proofs (same backend, same prompts) and verification."""
    setup = SuiteSetup(hidden=hidden, layers=layers, n_prompts=batch,
                       params=SamplingSpec(temperature=1.0, max_tokens=tokens))
    prompts = (setup.assigned() * batch)[:batch]
    seeds = [derive_seed(POOL_SEED, WORKER, bytes(32), j) for j in range(batch)]
    # no stop token, so that every completion has exactly `tokens` tokens
    worker = TorchBackend(setup.policy(), eos_token_id=NO_EOS)
    validator = TorchBackend(setup.policy(), eos_token_id=NO_EOS)
    n_params = sum(p.numel() for p in worker.model.parameters())
    gen_plain, gen_proofs, prove, verify = [], [], [], []
    gen_cpu, verify_cpu = [], []
    records: list[CompletionRecord] = []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        worker.generate(prompts, setup.params, seeds)
        gen_plain.append(time.perf_counter() - start)
        gen_cpu.append(time.process_time() - start_cpu)
        start = time.perf_counter()
        completions = worker.generate(prompts, setup.params, seeds)
        mid = time.perf_counter()
        proofs = build_proofs_batch([c.hidden for c in completions])
        gen_proofs.append(time.perf_counter() - start)
        prove.append(time.perf_counter() - mid)
        records = [
            CompletionRecord(prompt_ids=p, completion_ids=c.token_ids, proofs=pr, seed=c.seed,
                             finish_reason="length")
            for p, c, pr in zip(prompts, completions, proofs)
        ]
        config = setup.verify_config()
        start, start_cpu = time.perf_counter(), time.process_time()
        verdicts = verify_completions(validator, records, config)
        verify.append(time.perf_counter() - start)
        verify_cpu.append(time.process_time() - start_cpu)
        assert all(v.passed for v in verdicts), [v.failed for v in verdicts]
    n_tokens = sum(len(r.completion_ids) for r in records)
    best = min
    return {
        "params": n_params,
        "batch": batch,
        "tokens_per_completion": tokens,
        "proof_bytes_per_32_tokens": len(records[0].proofs[0]),
        "gen_s": best(gen_plain),
        "gen_with_proofs_s": best(gen_proofs),
        "prove_s": best(prove),
        "prover_overhead": best(prove) / best(gen_plain),
        "prover_overhead_wall": max(0.0, best(gen_proofs) / best(gen_plain) - 1),
        "verify_s": best(verify),
        "verify_speedup": best(gen_plain) / best(verify),
        "verify_speedup_cpu_time": best(gen_cpu) / best(verify_cpu),
        "verify_tokens_per_s": n_tokens / best(verify),
        "gen_tokens_per_s": n_tokens / best(gen_plain),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller run (about a minute)")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (1 is stable on a shared machine)"
    )
    add_record_option(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.quick:
        perf = measure_performance(hidden=256, layers=4, batch=4, tokens=256, repeats=2)
    else:
        perf = measure_performance(hidden=384, layers=6, batch=8, tokens=512, repeats=2)
    print(f"model: {perf['params'] / 1e6:.2f} M parameters, batch {perf['batch']}, "
          f"{perf['tokens_per_completion']} tokens per completion, {args.threads} CPU thread(s)")
    rows = [
        ("proof bytes per 32 tokens", f"{perf['proof_bytes_per_32_tokens']}"),
        ("generation (no proofs)", f"{perf['gen_s']:.3f} s, {perf['gen_tokens_per_s']:.0f} tok/s"),
        ("proof building", f"{perf['prove_s'] * 1000:.1f} ms"),
        ("prover overhead (prove / generate)", f"{perf['prover_overhead']:.4f}"),
        ("verification (prefill + all checks)", f"{perf['verify_s']:.3f} s"),
        ("verification speedup (generate / verify)", f"{perf['verify_speedup']:.1f}x"),
        ("same, in process CPU time (less load-bound)", f"{perf['verify_speedup_cpu_time']:.1f}x"),
        ("verification tokens/s", f"{perf['verify_tokens_per_s']:.0f}"),
    ]
    for label, value in rows:
        print(f"  {label:<44} {value}")

    setup = SuiteSetup(n_prompts=4 if args.quick else 8)
    suites = run_suite(setup, [FP32_THRESHOLDS, PAPER_THRESHOLDS])
    for profile, outcomes in suites.items():
        print()
        print(format_suite(outcomes, f"attack & honesty suite, thresholds: {profile}"))
    main_outcomes = suites["fp32"]
    c = confusion(main_outcomes)
    honest = [o for o in main_outcomes if o.honest]
    print(f"\nsampling replay on honest runs: {sum(o.tokens for o in honest)} tokens, "
          f"{c['false_positive']} completions rejected, largest score gap "
          f"{max(o.max_replay_gap for o in honest):.2e} (allowed: 2*eps/T = "
          f"{2 * setup.logit_tolerance / setup.params.temperature:.0e})")
    emit({
        "proof_bytes_per_32_tokens": perf["proof_bytes_per_32_tokens"],
        "prover_overhead": round(perf["prover_overhead"], 5),
        "verify_speedup": round(perf["verify_speedup"], 2),
        "verify_speedup_cpu_time": round(perf["verify_speedup_cpu_time"], 2),
        "verify_tokens_per_s": round(perf["verify_tokens_per_s"], 1),
        "detected": sum(o.correct for o in main_outcomes if not o.honest),
        "attacks": sum(not o.honest for o in main_outcomes),
        "false_positives": sum(not o.correct for o in main_outcomes if o.honest),
        "honest": sum(o.honest for o in main_outcomes),
        "completions_rejected_dishonest": c["true_positive"],
        "completions_dishonest": c["true_positive"] + c["false_negative"],
        "completions_identical_to_honest": c["identical_to_honest"],
        "completions_rejected_honest": c["false_positive"],
        "paper_thresholds_detected": sum(o.correct for o in suites["paper"] if not o.honest),
        "honest_tokens_replayed": sum(o.tokens for o in honest),
        "honest_max_replay_gap": max(o.max_replay_gap for o in honest),
    }, args, "toploc")


if __name__ == "__main__":
    exit_on_signals()
    main()
