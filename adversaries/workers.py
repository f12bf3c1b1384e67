"""Adversarial workers, built on the same libraries as the honest one (not part of `worker`).

Each attack is a rollout producer (and, for withholding, an upload function) that plugs into
`worker.daemon.WorkerDaemon`; `python -m adversaries.workers --attack NAME --pool N ...` runs
one as a daemon against a pool. The validator must challenge every one of them.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import math
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from adversaries import models
from inference.backend import Completion
from inference.exact import quantise_policy
from inference.exact_backend import ExactBackend
from inference.policy import stop_token_ids
from inference.torch_backend import TorchBackend
from ledger_client.ipfs.content import put_object
from proofs.toploc import build_proofs_batch
from protocol.rollouts import RolloutBatch, RolloutSample, encode_rollouts
from protocol.runspec import RunSpec
from protocol.submission import SubmissionBinding
from tasks.registry import build_task
from worker.policy import Policy
from worker.produce import make_batch

Producer = Callable[[Policy, RunSpec, SubmissionBinding], tuple[bytes, int]]
Attack = Callable[[Policy, RunSpec, SubmissionBinding, RolloutBatch], RolloutBatch]
"""An attack turns the honest batch of a submission into a dishonest one."""


def _with_samples(batch: RolloutBatch, samples: list[RolloutSample]) -> RolloutBatch:
    return RolloutBatch(header=batch.header, samples=samples)


def rescored(spec: RunSpec, tokenizer, samples: list[RolloutSample]) -> list[RolloutSample]:
    """Rewards recomputed honestly for (possibly altered) completions, so only the intended check trips."""
    task = build_task(spec.task)
    out = []
    for s in samples:
        text = tokenizer.decode(s.completion_ids, skip_special_tokens=True)
        out.append(s.model_copy(update={"reward": task.reward(task.problem(s.prompt_index), text,
                                                              len(s.completion_ids))}))
    return out


def fabricated_rewards(policy: Policy, spec: RunSpec, binding: SubmissionBinding, honest: RolloutBatch) -> RolloutBatch:
    """Claims every completion solved the task."""
    return _with_samples(honest, [s.model_copy(update={"reward": 1.0}) for s in honest.samples])


def cherry_picked_prompts(policy: Policy, spec: RunSpec, binding: SubmissionBinding,
                          honest: RolloutBatch) -> RolloutBatch:
    """Answers prompts of its own choosing (another nonce's assignment) instead of the assigned ones."""
    other = make_batch(policy, spec, binding.model_copy(update={"nonce": binding.nonce + 10_000}))
    return RolloutBatch(header=honest.header, samples=other.samples)


def tampered_completion(policy: Policy, spec: RunSpec, binding: SubmissionBinding,
                        honest: RolloutBatch) -> RolloutBatch:
    """Changes one token of one completion (rewards rescored so the file is self-consistent)."""
    samples = list(honest.samples)
    s = samples[0]
    ids = list(s.completion_ids)
    ids[0] = (ids[0] + 1) % len(policy.tokenizer) or 1
    samples[0] = s.model_copy(update={"completion_ids": ids})
    return _with_samples(honest, rescored(spec, policy.tokenizer, samples))


def with_completions(spec: RunSpec, tokenizer, honest: RolloutBatch, completions: list[Completion]) -> RolloutBatch:
    """`honest` with each row's tokens, logprobs, finish reason and proofs (the samplers' own) from `completions`,
    rewards rescored: an honest-looking file of another sampler's completions."""
    chunk = honest.header.proof_chunk
    # an exact pool's files carry no proofs (proof_chunk 0, docs/protocol.md R5.8)
    proofs = build_proofs_batch([c.hidden for c in completions], chunk=chunk) if chunk else [[] for _ in completions]
    # a greedy draw has probability 1: the exact backend's log softmax at T = 0 is not a number
    samples = [s.model_copy(update={"completion_ids": c.token_ids, "proofs": p,
                                    "logprobs": [lp if math.isfinite(lp) else 0.0 for lp in c.logprobs],
                                    "finish_reason": c.finish_reason})
               for s, c, p in zip(honest.samples, completions, proofs, strict=True)]
    return _with_samples(honest, rescored(spec, tokenizer, samples))


def _generate_with(model, policy: Policy, spec: RunSpec, honest: RolloutBatch, temperature: float) -> RolloutBatch:
    """Honest-looking file whose completions come from `model` at `temperature`."""
    stops = stop_token_ids(policy.model, policy.tokenizer)
    if spec.inference == "exact":  # the pool's sampler is the integer one: the attacker's model quantised
        backend = ExactBackend(quantise_policy(model), stops, policy.tokenizer.pad_token_id)
    else:
        backend = TorchBackend(model, eos_token_id=stops, pad_token_id=policy.tokenizer.pad_token_id)
    params = spec.sampling.model_copy(update={"temperature": temperature})
    completions = backend.generate([s.prompt_ids for s in honest.samples], params, [s.seed for s in honest.samples])
    return with_completions(spec, policy.tokenizer, honest, completions)


def wrong_temperature(policy: Policy, spec: RunSpec, binding: SubmissionBinding, honest: RolloutBatch) -> RolloutBatch:
    """Samples colder than the pool's temperature (declares the pool's)."""
    return _generate_with(policy.model, policy, spec, honest, spec.sampling.temperature * 0.5)


def greedy_decoding(policy: Policy, spec: RunSpec, binding: SubmissionBinding, honest: RolloutBatch) -> RolloutBatch:
    """Decodes greedily instead of sampling."""
    return _generate_with(policy.model, policy, spec, honest, 0.0)


def other_weights(policy: Policy, spec: RunSpec, binding: SubmissionBinding, honest: RolloutBatch) -> RolloutBatch:
    """Generates with a cheaper model (other weights) than the pool's policy."""
    return _generate_with(models.other_weights(policy.model), policy, spec, honest, spec.sampling.temperature)


def perturbed_weights(policy: Policy, spec: RunSpec, binding: SubmissionBinding, honest: RolloutBatch) -> RolloutBatch:
    """Generates with the policy's weights perturbed by 1% (e.g. a stale or fine-tuned copy)."""
    model = models.perturbed(copy.deepcopy(policy.model))  # a copy keeps the architecture and tied embeddings
    return _generate_with(model, policy, spec, honest, spec.sampling.temperature)


def corrupted_proofs(policy: Policy, spec: RunSpec, binding: SubmissionBinding, honest: RolloutBatch) -> RolloutBatch:
    """Flips bytes in the TOPLOC proofs."""
    samples = []
    for s in honest.samples:
        proofs = [p[:2] + bytes(b ^ 0x5A for b in p[2:]) for p in s.proofs]
        samples.append(s.model_copy(update={"proofs": proofs}))
    return _with_samples(honest, samples)


def truncated_completion(policy: Policy, spec: RunSpec, binding: SubmissionBinding,
                         honest: RolloutBatch) -> RolloutBatch:
    """Cuts a completion short and calls it finished (no EOS): the first one with two tokens or more
    (a one-token completion cannot be cut; with none, the batch is returned unchanged — a no-op)."""
    samples = list(honest.samples)
    i = next((i for i, s in enumerate(samples) if len(s.completion_ids) >= 2), None)
    if i is None:
        return honest
    s = samples[i]
    cut = len(s.completion_ids) // 2
    samples[i] = s.model_copy(update={"completion_ids": s.completion_ids[:cut], "logprobs": s.logprobs[:cut],
                                      "proofs": s.proofs[: math.ceil(cut / (honest.header.proof_chunk or 1))],
                                      "finish_reason": "eos"})
    return _with_samples(honest, rescored(spec, policy.tokenizer, samples))


def fabricate_completions(policy: Policy, spec: RunSpec, honest: RolloutBatch, indices) -> RolloutBatch:
    """The cheater of the spot-check rule: the completions at `indices` are replaced by tokens the policy
    did not sample — every token but a final stop token moves to the next id that is no stop token —
    keeping length, finish reason, seed, proofs and logprobs, with rewards rescored (a completion that is a
    lone stop token gets one made-up token before it). Only the checks that need a prefill (sampling
    replay, logprobs, TOPLOC) can tell, so only a spot check of one of these completions does."""
    stops = set(stop_token_ids(policy.model, policy.tokenizer))
    vocab = len(policy.tokenizer)

    def other(token: int) -> int:
        new = (token + 1) % vocab
        while new in stops:
            new = (new + 1) % vocab
        return new

    samples = list(honest.samples)
    for i in indices:
        s = samples[i]
        ids, logprobs = list(s.completion_ids), list(s.logprobs)
        body = len(ids) - 1 if ids and ids[-1] in stops else len(ids)
        if body == 0:
            ids, logprobs = [other(ids[0])] + ids, logprobs[:1] + logprobs
        else:
            ids = [other(t) for t in ids[:body]] + ids[body:]
        samples[i] = s.model_copy(update={"completion_ids": ids, "logprobs": logprobs})
    return _with_samples(honest, rescored(spec, policy.tokenizer, samples))


HOSTILE_ANSWERS = ("<answer>__builtins__.__setitem__('float',lambda *a:1.0)</answer>", "<answer>(f)(x)</answer>",
                   "<answer>__import__('os').system('sh')</answer>", "\\boxed{(lambda:0)()}")
"""Answers that were code in a scorer (issue 42): the poison that made every later score 1.0, a call through
parentheses, __import__, a lambda."""


def hostile_answers(policy: Policy, spec: RunSpec, binding: SubmissionBinding, honest: RolloutBatch) -> RolloutBatch:
    """Every completion replaced by one of HOSTILE_ANSWERS (cut to the pool's max_tokens, with a stop token), each
    claiming reward 1.0: nothing of it may run in the validator (tasks.gym, tasks.sandbox), and the reward check
    challenges the file. Proof counts follow the new lengths so that the file's schema holds."""
    stop = stop_token_ids(policy.model, policy.tokenizer)[0]
    samples = []
    for i, s in enumerate(honest.samples):
        text = HOSTILE_ANSWERS[i % len(HOSTILE_ANSWERS)]
        ids = policy.tokenizer.encode(text, add_special_tokens=False)[:spec.sampling.max_tokens - 1] + [stop]
        chunks = math.ceil(len(ids) / honest.header.proof_chunk) if honest.header.proof_chunk else 0
        proofs = (list(s.proofs) * chunks)[:chunks] if s.proofs else []
        samples.append(s.model_copy(update={"completion_ids": ids, "logprobs": [-1.0] * len(ids), "proofs": proofs,
                                            "finish_reason": "eos", "reward": 1.0}))
    return _with_samples(honest, samples)


WITHHELD: set[bytes] = set()
"""Digests of files `withheld` produced; `selective_upload` never uploads them."""


def withheld(policy: Policy, spec: RunSpec, binding: SubmissionBinding, honest: RolloutBatch) -> RolloutBatch:
    """An honest file that is submitted but never uploaded: nobody can fetch it (the attack is the upload)."""
    return honest


def selective_upload(kubo, data: bytes) -> None:
    """Uploads every file except the withheld ones."""
    if hashlib.sha256(data).digest() not in WITHHELD:
        put_object(kubo, data)


ATTACKS: dict[str, Attack] = {
    "fabricated_rewards": fabricated_rewards,
    "cherry_picked_prompts": cherry_picked_prompts,
    "tampered_completion": tampered_completion,
    "wrong_temperature": wrong_temperature,
    "greedy_decoding": greedy_decoding,
    "other_weights": other_weights,
    "perturbed_weights": perturbed_weights,
    "corrupted_proofs": corrupted_proofs,
    "truncated_completion": truncated_completion,
    "withheld": withheld,
    "hostile_answers": hostile_answers,
}
FALLBACK = "tampered_completion"
"""Always changes the file (one token of the first completion moves), so it replaces an attack that would not."""


def attack_file(name: str, policy: Policy, spec: RunSpec, binding: SubmissionBinding) -> tuple[str, bytes, int]:
    """The file of attack `name` for the submission — never a no-op: when the tampering leaves the file identical
    to the honest one but for its unchecked log-probs (e.g. every reward already 1.0, a colder or greedy sampler
    whose tokens happen to match, nothing to truncate) the fallback attack is used instead. Returns (attack used, bytes, samples)."""
    honest = make_batch(policy, spec, binding)
    attack = ATTACKS[name](policy, spec, binding, honest)
    data = encode_rollouts(attack)
    if name == "withheld":
        WITHHELD.add(hashlib.sha256(data).digest())
    elif not _changes_what_is_checked(attack, honest):
        name = FALLBACK
        data = encode_rollouts(ATTACKS[name](policy, spec, binding, honest))
    return name, data, len(honest.samples)


def _changes_what_is_checked(attack: RolloutBatch, honest: RolloutBatch) -> bool:
    """Whether the attack's file differs from the honest one in more than its log-probs, which no validator checks
    (a colder sampler whose tokens all happen to match the seeded draw at the pool's temperature is an honest file
    with other log-probs)."""
    if len(attack.samples) != len(honest.samples):
        return True
    same_logprobs = [a.model_copy(update={"logprobs": h.logprobs}) if len(a.logprobs) == len(h.logprobs) else a
                     for a, h in zip(attack.samples, honest.samples, strict=True)]
    return encode_rollouts(_with_samples(attack, same_logprobs)) != encode_rollouts(honest)


def cycling(names: list[str], min_interval_s: float = 0.0, stop: threading.Event | None = None) -> Producer:
    """A producer that uses the attacks in turn, one per submission, at most one every `min_interval_s` seconds
    (waiting on `stop`); `produce.used` lists the attack each submission really used (the fallback where the
    named one would have been a no-op)."""
    used: list[str] = []
    turn = [0]
    last = [-math.inf]
    stop = stop or threading.Event()

    def produce(policy: Policy, spec: RunSpec, binding: SubmissionBinding) -> tuple[bytes, int]:
        stop.wait(max(0.0, last[0] + min_interval_s - time.monotonic()))
        last[0] = time.monotonic()
        name = names[turn[0] % len(names)]
        turn[0] += 1
        name, data, n = attack_file(name, policy, spec, binding)
        used.append(name)
        return data, n

    produce.used = used  # type: ignore[attr-defined]
    return produce


def main(argv: list[str] | None = None) -> int:
    from inference.policy import PolicyLoader
    from cli.devnet import load_devnet_info
    from cli.errors import UsageError, one_line_errors
    from cli.options import add_chain_args
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
        p.add_argument("--min-interval", type=float, default=0.0,
                       help="seconds between the starts of two files at least (default 0: as fast as it can)")
        p.add_argument("--devnet-worker", type=int)
        add_chain_args(p)
        args = p.parse_args(argv)
        if args.min_interval < 0:
            raise UsageError(f"--min-interval must be >= 0, got {args.min_interval:g}")
        ledger = open_ledger(args)
        kubo_api = args.kubo_api or (load_devnet_info(args.devnet_dir) or {}).get("kubo_api")
        if not kubo_api:
            raise UsageError("no --kubo-api given and no devnet is up")
        stop = threading.Event()
        producer = cycling(args.attack, args.min_interval, stop)
        daemon = WorkerDaemon(ledger, WorkerOptions(pool_id=args.pool, kubo_api=kubo_api,
                                                    work_dir=args.work_dir or Path(".adversary") / ledger.address,
                                                    max_submissions=args.max_submissions,
                                                    submissions_per_step=args.submissions_per_step),
                              producer, PolicyLoader(),
                              upload=selective_upload)
        daemon.prepare()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        daemon.run(stop)
        return 0

    return run()


if __name__ == "__main__":
    raise SystemExit(main())
