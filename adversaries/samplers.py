"""Attackers of one pool's checkpoint at the profile it runs: dishonest samplers that hold the real weights.

Each attack makes the file of a fresh nonce for the pool's shape. Attackers that need a model compute in the
profile's worker dtype; "forged" attackers recompute their proofs and logprobs with one prefill of the real
checkpoint (in that dtype), so that only the sampling replay and the margin test can see their sampler; `steer`
searches among the tokens the tolerance admits for a higher reward. `python -m bench.attacks` runs them all
through the validator's checks at the fp32 and bf16 profiles (bench.file_size and bench.policy_drift use some).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from eth_utils import keccak

from adversaries import models, workers
from adversaries.completions import chosen_seeds, with_proofs_of
from adversaries.workers import rescored, with_completions
from inference.logprobs import token_logprobs
from inference.policy import load_policy, stop_token_ids
from inference.torch_backend import TorchBackend
from proofs.sampling import GUMBEL_TOLERANCE, gumbel_noise
from proofs.toploc import build_proofs_batch
from protocol.digest import Digest
from protocol.rollouts import RolloutBatch
from protocol.runspec import RunSpec, VerificationSpec
from protocol.submission import SubmissionBinding
from tasks.registry import build_task
from worker.policy import Policy
from worker.produce import make_batch

WORKER = "0x" + "ab" * 20
"""The address every file of a Checkpoint is bound to (one worker: the attacker, or the honest one)."""
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass
class Profile:
    """A pool's verification rules and the dtype its honest workers compute in."""

    name: str
    worker_dtype: str
    verification: VerificationSpec
    stated: dict = field(default_factory=dict)

    def spec(self, base: RunSpec) -> RunSpec:
        return base.model_copy(update={"verification": self.verification})


class Checkpoint:
    """One pool's checkpoint (a Hugging Face folder) as every worker holds it, without a chain: the float32
    model, an honest worker per dtype, fresh copies for attackers to change, and the bindings of their files."""

    def __init__(self, folder: Path, spec: RunSpec):
        self.folder, self.spec, self.task = folder, spec, build_task(spec.task)
        self.model, self.tokenizer = load_policy(folder)
        self.stops = stop_token_ids(self.model, self.tokenizer)
        self.digest = Digest(keccak(b"bench.attacks checkpoint"))
        self._workers: dict[str, tuple[Policy, TorchBackend]] = {}

    def backend(self, model, dtype: torch.dtype) -> TorchBackend:
        return TorchBackend(model, compute_dtype=dtype, eos_token_id=self.stops, pad_token_id=self.tokenizer.pad_token_id)

    def fresh_model(self):
        return load_policy(self.folder)[0]

    def worker(self, dtype: str) -> tuple[Policy, TorchBackend]:
        """The honest worker of `dtype` and its backend (its model converted to that dtype once)."""
        if dtype not in self._workers:
            policy = Policy(0, bytes(self.digest), self.fresh_model(), self.tokenizer, self.folder)
            self._workers[dtype] = (policy, self.backend(policy.model, DTYPES[dtype]))
        return self._workers[dtype]

    def binding(self, nonce: int) -> SubmissionBinding:
        return SubmissionBinding(chain_id=31337, pool_contract="0x" + "cd" * 20, pool_id=1, worker=WORKER, step=0,
                                 nonce=nonce, seed_block_hash=Digest(keccak(b"seed block" + nonce.to_bytes(8, "big"))))

    def honest(self, spec: RunSpec, nonce: int, dtype: str, batch_size: int | None = None) -> RolloutBatch:
        policy, backend = self.worker(dtype)
        backend = backend if batch_size is None else Batched(backend, batch_size)
        return make_batch(policy, spec, self.binding(nonce), backend=backend)


class Batched:
    """A backend that generates in batches of at most `size` rows (an honest worker's batch size)."""

    def __init__(self, backend: TorchBackend, size: int):
        self.backend, self.size = backend, size

    def generate(self, prompts, params, seeds):
        out = []
        for begin in range(0, len(prompts), self.size):
            out += self.backend.generate(prompts[begin : begin + self.size], params, seeds[begin : begin + self.size])
        return out

    def __getattr__(self, name):
        return getattr(self.backend, name)


Attack = Callable[[Checkpoint, Profile, RunSpec, int], RolloutBatch]
"""(checkpoint, profile, the pool's run spec at that profile, nonce) -> the attacker's file."""


def forged(ckpt: Checkpoint, profile: Profile, spec: RunSpec, batch: RolloutBatch) -> RolloutBatch:
    """`batch`'s tokens with proofs and logprobs recomputed by one prefill of the real checkpoint in the worker's
    dtype: what any worker holding the checkpoint can attach to any tokens."""
    backend = ckpt.worker(profile.worker_dtype)[1]
    prefills = backend.prefill_batch([(s.prompt_ids, s.completion_ids) for s in batch.samples])
    t = spec.sampling.temperature or 1.0
    samples = [s.model_copy(update={
        "proofs": build_proofs_batch([p.hidden], chunk=batch.header.proof_chunk)[0],
        "logprobs": token_logprobs(p.logits.float(), torch.tensor(s.completion_ids), t).tolist()})
        for s, p in zip(batch.samples, prefills, strict=True)]
    return RolloutBatch(header=batch.header, samples=samples)


def sampled_with(ckpt: Checkpoint, profile: Profile, spec: RunSpec, nonce: int, model, temperature_scale: float = 1.0,
                 top_p: float | None = None) -> RolloutBatch:
    """A file whose completions `model` sampled (in the worker's dtype, at T x `temperature_scale`, at `top_p`),
    declaring the pool's sampling; proofs and logprobs are the sampler's own."""
    honest = ckpt.honest(spec, nonce, profile.worker_dtype)
    backend = ckpt.backend(model, DTYPES[profile.worker_dtype])
    params = spec.sampling.model_copy(update={"temperature": spec.sampling.temperature * temperature_scale,
                                              "top_p": spec.sampling.top_p if top_p is None else top_p})
    completions = backend.generate([s.prompt_ids for s in honest.samples], params, [s.seed for s in honest.samples])
    return with_completions(spec, ckpt.tokenizer, honest, completions)


def logit_biased(ckpt: Checkpoint, profile: Profile, spec: RunSpec, nonce: int) -> RolloutBatch:
    """Samples with +1.9 eps on the logits of the tokens of each prompt's answer (the pool's real weights)."""
    honest = ckpt.honest(spec, nonce, profile.worker_dtype)
    model = ckpt.fresh_model()
    head = model.get_output_embeddings()
    head.bias = torch.nn.Parameter(torch.zeros(head.weight.shape[0]), requires_grad=False)
    backend = ckpt.backend(model, DTYPES[profile.worker_dtype])
    bias = 1.9 * profile.verification.logit_tolerance
    completions = []
    g = spec.sampling.group_size
    for begin in range(0, len(honest.samples), g):
        rows = honest.samples[begin : begin + g]
        answer = ckpt.task.problem(rows[0].prompt_index).answer
        with torch.no_grad():
            head.bias.zero_()
            head.bias[sorted(set(ckpt.tokenizer.encode(answer, add_special_tokens=False)))] = bias
        completions += backend.generate([s.prompt_ids for s in rows], spec.sampling, [s.seed for s in rows])
    return forged(ckpt, profile, spec, with_completions(spec, ckpt.tokenizer, honest, completions))


def copied_proofs(ckpt: Checkpoint, profile: Profile, spec: RunSpec, nonce: int) -> RolloutBatch:
    """Each completion carries the proofs of the next one."""
    honest = ckpt.honest(spec, nonce, profile.worker_dtype)
    s = honest.samples
    return RolloutBatch(header=honest.header, samples=with_proofs_of(s, s[1:] + s[:1]))


def own_seeds(ckpt: Checkpoint, profile: Profile, spec: RunSpec, nonce: int) -> RolloutBatch:
    """Samples with seeds of its choosing (seed grinding inside a file)."""
    honest = ckpt.honest(spec, nonce, profile.worker_dtype)
    seeds = chosen_seeds(len(honest.samples))
    backend = ckpt.worker(profile.worker_dtype)[1]
    completions = backend.generate([s.prompt_ids for s in honest.samples], spec.sampling, seeds)
    batch = with_completions(spec, ckpt.tokenizer, honest, completions)
    return RolloutBatch(header=batch.header, samples=[s.model_copy(update={"seed": seed})
                                                      for s, seed in zip(batch.samples, seeds)])


def adversary(name: str) -> Attack:
    """An attack of adversaries.workers on the worker's honest file."""
    def attack(ckpt: Checkpoint, profile: Profile, spec: RunSpec, nonce: int) -> RolloutBatch:
        policy = Policy(0, bytes(ckpt.digest), ckpt.fresh_model(), ckpt.tokenizer, ckpt.folder)
        return workers.ATTACKS[name](policy, spec, ckpt.binding(nonce), ckpt.honest(spec, nonce, profile.worker_dtype))
    return attack


def changed_model(name: str, forge: bool = False) -> Attack:
    """Files sampled from the checkpoint changed by models.CHANGES[name], with its own proofs or `forge`d ones."""
    def attack(ckpt: Checkpoint, profile: Profile, spec: RunSpec, nonce: int) -> RolloutBatch:
        batch = sampled_with(ckpt, profile, spec, nonce, models.CHANGES[name](ckpt.fresh_model()))
        return forged(ckpt, profile, spec, batch) if forge else batch
    return attack


def attacks(top_p_spec: RunSpec | None) -> dict[str, Attack]:
    """Every file attack: name -> builder. `top_p_spec`: the pool at top_p 0.9 where the profile allows it."""
    table: dict[str, Attack] = {name: adversary(name) for name in workers.ATTACKS if name != "withheld"}
    table.update({
        "proofs copied from the next completion": copied_proofs,
        "seeds of its own choosing": own_seeds,
        "int8 weights": changed_model("int8 weights"),
        "int8 weights, forged": changed_model("int8 weights", forge=True),
        "int4 weights (groups of 32), forged": changed_model("int4 weights (groups of 32)", forge=True),
        "layer 0 x 1.01": changed_model("layer 0 x 1.01"),
        "layer 0 x 1.01, forged": changed_model("layer 0 x 1.01", forge=True),
        "other weights, forged": lambda ckpt, pr, spec, n: forged(
            ckpt, pr, spec, sampled_with(ckpt, pr, spec, n, models.other_weights(ckpt.fresh_model()))),
        "T x 0.95, forged": lambda ckpt, pr, spec, n: forged(
            ckpt, pr, spec, sampled_with(ckpt, pr, spec, n, ckpt.fresh_model(), temperature_scale=0.95)),
        "T x 1.05, forged": lambda ckpt, pr, spec, n: forged(
            ckpt, pr, spec, sampled_with(ckpt, pr, spec, n, ckpt.fresh_model(), temperature_scale=1.05)),
        "logit bias 1.9 eps on answer tokens, forged": logit_biased,
    })
    if top_p_spec is not None:
        table["out-of-nucleus tokens (top_p 0.9), forged"] = lambda ckpt, pr, spec, n: forged(
            ckpt, pr, top_p_spec, sampled_with(ckpt, pr, top_p_spec, n, ckpt.fresh_model(), top_p=1.0))
    return table


def steer(ckpt: Checkpoint, profile: Profile, spec: RunSpec, nonce: int, budget: int
          ) -> tuple[RolloutBatch, float, float]:
    """A worker that knows the validator's float32 logits (the checkpoint's) and the public noise: per completion, a
    tree search over the tokens the tolerance admits (score gap below the replay's bound) for the highest reward,
    `budget` rollouts of the honest rule per completion. Returns the file (proofs and logprobs by a prefill of the
    real checkpoint), its mean reward gain over the honest rule's completions and their mean reward."""
    honest = ckpt.honest(spec, nonce, profile.worker_dtype)
    model = ckpt.model
    s = spec.sampling
    bound = 2 * profile.verification.logit_tolerance / s.temperature + 2 * GUMBEL_TOLERANCE
    stops = set(ckpt.stops)

    @torch.no_grad()
    def options(prompt: list[int], prefix: list[int], seed: int) -> list[int]:
        """The admissible tokens at the next position, best score first."""
        logits = model(torch.tensor([prompt + prefix])).logits[0, -1].float()
        scores = logits / s.temperature + gumbel_noise(torch.tensor([seed]), torch.tensor([len(prefix)]),
                                                       logits.shape[0])[0]
        best = scores.max()
        order = scores.argsort(descending=True)
        return [int(v) for v in order if best - scores[v] < 0.999 * bound]

    def rollout(prompt, prefix, seed) -> list[int]:
        tokens = list(prefix)
        while len(tokens) < s.max_tokens and not (tokens and tokens[-1] in stops):
            tokens.append(options(prompt, tokens, seed)[0])
        return tokens

    def reward(row, tokens) -> float:
        text = ckpt.tokenizer.decode(tokens, skip_special_tokens=True)
        return ckpt.task.reward(ckpt.task.problem(row.prompt_index), text, len(tokens))

    steered, gains, bases = [], [], []
    for row in honest.samples:
        best = rollout(row.prompt_ids, [], row.seed)
        base = best_reward = reward(row, best)
        frontier, spent = [best], 0
        while frontier and spent < budget and best_reward < 1.0:
            path = frontier.pop(0)
            for i in range(len(path)):
                for alternative in options(row.prompt_ids, path[:i], row.seed)[1:]:
                    if spent >= budget:
                        break
                    candidate = rollout(row.prompt_ids, path[:i] + [alternative], row.seed)
                    spent += 1
                    r = reward(row, candidate)
                    if r > best_reward:
                        best, best_reward = candidate, r
                        frontier.append(candidate)
        steered.append(row.model_copy(update={"completion_ids": best, "logprobs": [0.0] * len(best),
                                              "finish_reason": "eos" if best[-1] in stops else "length",
                                              "proofs": []}))
        gains.append(best_reward - base)
        bases.append(base)
    batch = RolloutBatch(header=honest.header, samples=rescored(spec, ckpt.tokenizer, steered))
    return forged(ckpt, profile, spec, batch), sum(gains) / len(gains), sum(bases) / len(bases)
