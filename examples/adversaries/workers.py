"""Adversarial workers, built on the same libraries as the honest one (not part of `worker`).

Each attack is a rollout producer (and, for withholding, an upload function) that plugs into
`worker.daemon.WorkerDaemon`; `python -m examples.adversaries --attack NAME --pool N ...` runs
one as a daemon against a pool. The validator must challenge every one of them.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import torch

from inference.policy import stop_token_ids
from inference.tiny import build_tiny_llama
from inference.torch_backend import TorchBackend
from ledger_client.ipfs.content import put_object
from proofs.toploc import build_proofs_batch
from protocol.rollouts import RolloutBatch, RolloutSample, encode_rollouts
from protocol.runspec import RunSpec
from tasks.registry import build_task
from worker.policy import Policy
from worker.produce import make_batch

Producer = Callable[[Policy, RunSpec, str, int, int], tuple[bytes, int]]


def _file(batch: RolloutBatch) -> tuple[bytes, int]:
    return encode_rollouts(batch), len(batch.samples)


def _with_samples(batch: RolloutBatch, samples: list[RolloutSample]) -> RolloutBatch:
    return RolloutBatch(header=batch.header, samples=samples)


def _rescored(spec: RunSpec, tokenizer, samples: list[RolloutSample]) -> list[RolloutSample]:
    """Rewards recomputed honestly for (possibly altered) completions, so only the intended check trips."""
    task = build_task(spec.task)
    out = []
    for s in samples:
        text = tokenizer.decode(s.completion_ids, skip_special_tokens=True)
        out.append(s.model_copy(update={"reward": task.reward(task.problem(s.prompt_index), text,
                                                              len(s.completion_ids))}))
    return out


def fabricated_rewards(policy: Policy, spec: RunSpec, worker: str, step: int, nonce: int) -> tuple[bytes, int]:
    """Claims every completion solved the task."""
    batch = make_batch(policy, spec, worker, step, nonce)
    return _file(_with_samples(batch, [s.model_copy(update={"reward": 1.0}) for s in batch.samples]))


def cherry_picked_prompts(policy: Policy, spec: RunSpec, worker: str, step: int, nonce: int) -> tuple[bytes, int]:
    """Answers prompts of its own choosing (another nonce's assignment) instead of the assigned ones."""
    honest = make_batch(policy, spec, worker, step, nonce + 10_000)
    header = honest.header.model_copy(update={"nonce": nonce})
    return _file(RolloutBatch(header=header, samples=honest.samples))


def tampered_completion(policy: Policy, spec: RunSpec, worker: str, step: int, nonce: int) -> tuple[bytes, int]:
    """Changes one token of one completion (rewards rescored so the file is self-consistent)."""
    batch = make_batch(policy, spec, worker, step, nonce)
    samples = list(batch.samples)
    s = samples[0]
    ids = list(s.completion_ids)
    ids[0] = (ids[0] + 1) % len(policy.tokenizer) or 1
    samples[0] = s.model_copy(update={"completion_ids": ids})
    return _file(_with_samples(batch, _rescored(spec, policy.tokenizer, samples)))


def _generate_with(model, policy: Policy, spec: RunSpec, worker: str, step: int, nonce: int,
                   temperature: float) -> RolloutBatch:
    """Honest-looking file whose completions come from `model` at `temperature`."""
    batch = make_batch(policy, spec, worker, step, nonce)
    backend = TorchBackend(model, eos_token_id=stop_token_ids(policy.model, policy.tokenizer),
                           pad_token_id=policy.tokenizer.pad_token_id)
    params = spec.sampling.model_copy(update={"temperature": temperature})
    completions = backend.generate([s.prompt_ids for s in batch.samples], params, [s.seed for s in batch.samples])
    proofs = build_proofs_batch([c.hidden for c in completions], chunk=batch.header.proof_chunk)
    samples = [s.model_copy(update={"completion_ids": c.token_ids, "logprobs": c.logprobs, "proofs": p,
                                    "finish_reason": c.finish_reason})
               for s, c, p in zip(batch.samples, completions, proofs, strict=True)]
    return _with_samples(batch, _rescored(spec, policy.tokenizer, samples))


def wrong_temperature(policy: Policy, spec: RunSpec, worker: str, step: int, nonce: int) -> tuple[bytes, int]:
    """Samples colder than the pool's temperature (declares the pool's)."""
    return _file(_generate_with(policy.model, policy, spec, worker, step, nonce, spec.sampling.temperature * 0.5))


def greedy_decoding(policy: Policy, spec: RunSpec, worker: str, step: int, nonce: int) -> tuple[bytes, int]:
    """Decodes greedily instead of sampling."""
    return _file(_generate_with(policy.model, policy, spec, worker, step, nonce, 0.0))


def other_weights(policy: Policy, spec: RunSpec, worker: str, step: int, nonce: int) -> tuple[bytes, int]:
    """Generates with a cheaper model (other weights) than the pool's policy."""
    cfg = policy.model.config
    cheap = build_tiny_llama(cfg.vocab_size, seed=12345, hidden=cfg.hidden_size, layers=cfg.num_hidden_layers,
                             heads=cfg.num_attention_heads)
    return _file(_generate_with(cheap, policy, spec, worker, step, nonce, spec.sampling.temperature))


def perturbed_weights(policy: Policy, spec: RunSpec, worker: str, step: int, nonce: int) -> tuple[bytes, int]:
    """Generates with the policy's weights perturbed by 1% (e.g. a stale or fine-tuned copy)."""
    model = build_tiny_llama(policy.model.config.vocab_size, seed=0, hidden=policy.model.config.hidden_size,
                             layers=policy.model.config.num_hidden_layers,
                             heads=policy.model.config.num_attention_heads)
    model.load_state_dict(policy.model.state_dict())
    with torch.no_grad():
        gen = torch.Generator().manual_seed(7)
        for p in model.parameters():
            p.mul_(1 + 0.01 * torch.randn(p.shape, generator=gen))
    return _file(_generate_with(model, policy, spec, worker, step, nonce, spec.sampling.temperature))


def corrupted_proofs(policy: Policy, spec: RunSpec, worker: str, step: int, nonce: int) -> tuple[bytes, int]:
    """Flips bytes in the TOPLOC proofs."""
    batch = make_batch(policy, spec, worker, step, nonce)
    samples = []
    for s in batch.samples:
        proofs = [p[:2] + bytes(b ^ 0x5A for b in p[2:]) for p in s.proofs]
        samples.append(s.model_copy(update={"proofs": proofs}))
    return _file(_with_samples(batch, samples))


def truncated_completion(policy: Policy, spec: RunSpec, worker: str, step: int, nonce: int) -> tuple[bytes, int]:
    """Cuts a completion short and calls it finished (no EOS)."""
    batch = make_batch(policy, spec, worker, step, nonce)
    samples = list(batch.samples)
    s = samples[0]
    cut = max(1, len(s.completion_ids) // 2)
    samples[0] = s.model_copy(update={"completion_ids": s.completion_ids[:cut], "logprobs": s.logprobs[:cut],
                                      "proofs": s.proofs[: math.ceil(cut / batch.header.proof_chunk)],
                                      "finish_reason": "eos"})
    return _file(_with_samples(batch, _rescored(spec, policy.tokenizer, samples)))


def altered_logprobs(policy: Policy, spec: RunSpec, worker: str, step: int, nonce: int) -> tuple[bytes, int]:
    """Honest completions with made-up per-token logprobs (what the trainer's importance ratios use)."""
    batch = make_batch(policy, spec, worker, step, nonce)
    samples = [s.model_copy(update={"logprobs": [lp - 0.05 for lp in s.logprobs]}) for s in batch.samples]
    return _file(_with_samples(batch, samples))


WITHHELD: set[bytes] = set()
"""Digests of files `withheld` produced; `selective_upload` never uploads them."""


def withheld(policy: Policy, spec: RunSpec, worker: str, step: int, nonce: int) -> tuple[bytes, int]:
    """An honest file that is submitted but never uploaded: nobody can fetch it."""
    data, n = _file(make_batch(policy, spec, worker, step, nonce))
    WITHHELD.add(hashlib.sha256(data).digest())
    return data, n


def selective_upload(kubo, data: bytes) -> None:
    """Uploads every file except the withheld ones."""
    if hashlib.sha256(data).digest() not in WITHHELD:
        put_object(kubo, data)


ATTACKS: dict[str, Producer] = {
    "fabricated_rewards": fabricated_rewards,
    "cherry_picked_prompts": cherry_picked_prompts,
    "tampered_completion": tampered_completion,
    "wrong_temperature": wrong_temperature,
    "greedy_decoding": greedy_decoding,
    "other_weights": other_weights,
    "perturbed_weights": perturbed_weights,
    "corrupted_proofs": corrupted_proofs,
    "truncated_completion": truncated_completion,
    "altered_logprobs": altered_logprobs,
    "withheld": withheld,
}


def cycling(names: list[str]) -> Producer:
    """A producer that uses the attacks in turn, one per submission; `produce.used` lists them."""
    used: list[str] = []

    def produce(policy: Policy, spec: RunSpec, worker: str, step: int, nonce: int) -> tuple[bytes, int]:
        name = names[len(used) % len(names)]
        used.append(name)
        return ATTACKS[name](policy, spec, worker, step, nonce)

    produce.used = used  # type: ignore[attr-defined]
    return produce


def main(argv: list[str] | None = None) -> int:
    from inference.policy import load_policy
    from ledger_client.cli import UsageError, add_chain_args, load_devnet_info, one_line_errors
    from worker.account import open_ledger
    from worker.daemon import WorkerDaemon, WorkerOptions

    @one_line_errors
    def run() -> int:
        p = argparse.ArgumentParser(prog="adversary", description=__doc__.splitlines()[0])
        p.add_argument("--attack", action="append", required=True, choices=sorted(ATTACKS),
                       help="attack to use (repeat to cycle through several)")
        p.add_argument("--pool", type=int, required=True)
        p.add_argument("--kubo-api")
        p.add_argument("--work-dir", type=Path)
        p.add_argument("--max-submissions", type=int)
        p.add_argument("--submissions-per-step", type=int, default=2)
        p.add_argument("--devnet-worker", type=int)
        add_chain_args(p)
        args = p.parse_args(argv)
        ledger = open_ledger(args)
        kubo_api = args.kubo_api or (load_devnet_info(args.devnet_dir) or {}).get("kubo_api")
        if not kubo_api:
            raise UsageError("no --kubo-api given and no devnet is up")
        producer = cycling(args.attack)
        daemon = WorkerDaemon(ledger, WorkerOptions(pool_id=args.pool, kubo_api=kubo_api,
                                                    work_dir=args.work_dir or Path(".adversary") / ledger.address,
                                                    max_submissions=args.max_submissions,
                                                    submissions_per_step=args.submissions_per_step),
                              producer, load_policy,
                              upload=selective_upload)
        daemon.prepare()
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        daemon.run(stop)
        return 0

    return run()


if __name__ == "__main__":
    raise SystemExit(main())
