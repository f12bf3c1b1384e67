"""Every attack on the checks, at the profiles pools use: `python -m bench.attacks [--quick]`.

Two profiles of one pool (examples/run-attacks.toml, the tiny char-level policy warm-started on its task, saved as
a bf16-exact Hugging Face folder):
- fp32: float32 workers, float32 validator, the run spec's [verification] as shipped (tolerance 1e-3);
- bf16: bf16 workers, float32 validator, [verification] from `validator calibrate --json` on that folder (its
  dtypes float32 and bfloat16, batch sizes 1 and 8): the tolerance, TOPLOC limits and margin null it writes.

Each attack makes files of the pool's shape for fresh nonces and each file goes through the validator's own checks
after the file's identity (validator.checks.check_contents: vocabulary, assignment, rewards, then every completion
at q = 1: structure, termination, sampling replay, logprobs, TOPLOC, the margin test); hostile bytes go through
the decoder first. Attackers that need a model compute in the profile's worker dtype; "forged" attackers recompute
their proofs and logprobs with one prefill of the real checkpoint (in that dtype), so that only the replay and the
margin test can see their sampler. Steering searches among the tokens the tolerance admits under the validator's
own float32 logits for a higher reward, on a policy warm-started until it solves part of the task
(`--steering-warm-steps`, its own bf16 calibration); its reward gain per completion, the files challenged and its
per-worker accumulated test (validator.worker_margins: after how many files, how often) are reported. An honest campaign checks files across worker dtypes,
batch sizes and lengths at both profiles (and keeps one per-worker book per profile).

Printed: per attack and profile the files detected with a Wilson 95 % interval and the challenge reasons; honest
false positives with their rate's upper Wilson bound and the per-file rate the profile states. Last line: one
JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from eth_utils import keccak
from rich.console import Console
from rich.table import Table

from bench.detection import wilson
from adversaries import files as hostile_files
from adversaries.workers import ATTACKS, _rescored
from inference.logprobs import token_logprobs
from inference.policy import load_policy, stop_token_ids
from inference.torch_backend import TorchBackend
from proofs.sampling import GUMBEL_TOLERANCE, gumbel_noise
from proofs.toploc import build_proofs_batch
from protocol.digest import Digest
from protocol.rollouts import RolloutBatch, RolloutFileError, RolloutLimits, decode_rollouts, encode_rollouts
from protocol.runspec import RunSpec, VerificationSpec, load_run_spec
from protocol.spotcheck import MAX_BPS
from protocol.submission import SubmissionBinding
from tasks.registry import build_task
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from validator.checks import PROOF_CHUNK, check_contents, verify_config_of
from validator.daemon import CheckOutcome, Submission
from validator.worker_margins import WorkerMargins
from worker.policy import Policy
from worker.produce import make_batch

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SPEC = ROOT / "examples/run-attacks.toml"
Z95 = 1.959964
WORKER = "0x" + "ab" * 20
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
SYSTEMATIC = ("int8 weights", "int8 weights, forged", "int4 weights (groups of 32), forged", "layer 0 x 1.01", "layer 0 x 1.01, forged", "T x 0.95, forged",
              "T x 1.05, forged", "logit bias 1.9 eps on answer tokens, forged", "other weights, forged",
              "out-of-nucleus tokens (top_p 0.9), forged")
"""The sampler attacks issue 26 asks to catch in >= 99 % of files at the bf16 profile."""
ATTACK_WARM_STEPS = 25
"""The attacked policy: trainer init's default warm start (held-out accuracy ~0.07)."""
STEERING_WARM_STEPS = 100
"""The steering worker's policy: warm-started until it solves part of the task, so that a search among near-ties
has rewards to find (at 25 steps it almost never solves a sort and steering gained nothing)."""


@dataclass
class Profile:
    """A pool's verification rules and the dtype its honest workers compute in."""

    name: str
    worker_dtype: str
    verification: VerificationSpec
    stated: dict = field(default_factory=dict)

    def spec(self, base: RunSpec) -> RunSpec:
        return base.model_copy(update={"verification": self.verification})


class Lab:
    """One pool's checkpoint and the parties around it, without a chain: honest workers per dtype, attackers,
    and the validator's float32 reference backend."""

    def __init__(self, folder: Path, spec: RunSpec):
        self.folder, self.spec, self.task = folder, spec, build_task(spec.task)
        model, self.tokenizer = load_policy(folder)
        self.stops = stop_token_ids(model, self.tokenizer)
        self.validator = self._backend(model, torch.float32)
        self.digest = Digest(keccak(b"bench.attacks checkpoint"))
        self._workers: dict[str, tuple[Policy, TorchBackend]] = {}

    def _backend(self, model, dtype: torch.dtype) -> TorchBackend:
        return TorchBackend(model, compute_dtype=dtype, eos_token_id=self.stops, pad_token_id=self.tokenizer.pad_token_id)

    def fresh_model(self):
        return load_policy(self.folder)[0]

    def worker(self, dtype: str) -> tuple[Policy, TorchBackend]:
        """The honest worker of `dtype` and its backend (its model converted to that dtype once)."""
        if dtype not in self._workers:
            policy = Policy(0, bytes(self.digest), self.fresh_model(), self.tokenizer, self.folder)
            self._workers[dtype] = (policy, self._backend(policy.model, DTYPES[dtype]))
        return self._workers[dtype]

    def binding(self, nonce: int) -> SubmissionBinding:
        return SubmissionBinding(chain_id=31337, pool_contract="0x" + "cd" * 20, pool_id=1, worker=WORKER, step=0,
                                 nonce=nonce, seed_block_hash=Digest(keccak(b"seed block" + nonce.to_bytes(8, "big"))))

    def honest(self, spec: RunSpec, nonce: int, dtype: str, batch_size: int | None = None) -> RolloutBatch:
        policy, backend = self.worker(dtype)
        backend = backend if batch_size is None else Batched(backend, batch_size)
        return make_batch(policy, spec, self.binding(nonce), backend=backend)

    def honest_contexts(self, files: int) -> list[tuple[list[int], list[int]]]:
        """(prompt, completion) of every completion of `files` honest float32 files of the pool (nonces 900,000 on)."""
        return [(s.prompt_ids, s.completion_ids) for n in range(files)
                for s in self.honest(self.spec, 900_000 + n, "float32").samples]

    def judge(self, spec: RunSpec, batch: RolloutBatch) -> CheckOutcome:
        """The validator's checks after identity, every completion checked (q = 1)."""
        h = batch.header
        sub = Submission(self.binding(h.nonce).work_id, h.pool_id, h.worker, h.policy_step, len(batch.samples),
                         h.nonce, b"\x00" * 32)
        return check_contents(spec, self.task, verify_config_of(spec), MAX_BPS, sub, batch, self.validator,
                              self.tokenizer)

    def judge_bytes(self, spec: RunSpec, data: bytes) -> CheckOutcome:
        """`judge` after the decoder (RolloutChecker.check's first step), for files that attack the reader."""
        try:
            batch = decode_rollouts(data, RolloutLimits.for_spec(spec, PROOF_CHUNK))
        except RolloutFileError as exc:
            return CheckOutcome(False, message=str(exc)[:200], reason=None)
        return self.judge(spec, batch)


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


# ---- building the pool ---------------------------------------------------------------------------------------


def build_checkpoint(spec: RunSpec, folder: Path, warm_steps: int) -> Path:
    """The tiny policy warm-started on the task, its weights rounded to bf16 (a bf16 checkpoint read in float32)."""
    model, tokenizer = init_policy(spec, ModelSpec(hidden=64, layers=2, heads=4), warm_steps=warm_steps, warm_lr=1e-3)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def calibrated_profile(folder: Path, spec_path: Path, prompts: int) -> Profile:
    """The bf16 profile: `validator calibrate` as a pool owner runs it (its JSON output)."""
    command = [sys.executable, "-m", "validator.cli", "calibrate", "--checkpoint", str(folder), "--run-spec",
               str(spec_path), "--dtypes", "float32,bfloat16", "--batch-sizes", "1,8", "--prompts", str(prompts),
               "--json"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"validator calibrate failed: {done.stderr.strip()[-500:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return Profile("bf16", "bfloat16", VerificationSpec(**result["verification"]), result["stated"])


# ---- attacks -------------------------------------------------------------------------------------------------

Attack = Callable[[Lab, Profile, RunSpec, int], RolloutBatch]


def _with_tokens(lab: Lab, spec: RunSpec, honest: RolloutBatch, completions) -> RolloutBatch:
    """`honest` with each row's tokens, logprobs, proofs and finish reason from `completions`; rewards rescored."""
    samples = [s.model_copy(update={"completion_ids": c.token_ids, "logprobs": c.logprobs,
                                    "proofs": build_proofs_batch([c.hidden], chunk=PROOF_CHUNK)[0],
                                    "finish_reason": c.finish_reason})
               for s, c in zip(honest.samples, completions, strict=True)]
    return RolloutBatch(header=honest.header, samples=_rescored(spec, lab.tokenizer, samples))


def forged(lab: Lab, profile: Profile, spec: RunSpec, batch: RolloutBatch) -> RolloutBatch:
    """`batch`'s tokens with proofs and logprobs recomputed by one prefill of the real checkpoint in the worker's
    dtype: what any worker holding the checkpoint can attach to any tokens."""
    backend = lab.worker(profile.worker_dtype)[1]
    prefills = backend.prefill_batch([(s.prompt_ids, s.completion_ids) for s in batch.samples])
    t = spec.sampling.temperature or 1.0
    samples = [s.model_copy(update={
        "proofs": build_proofs_batch([p.hidden], chunk=PROOF_CHUNK)[0],
        "logprobs": token_logprobs(p.logits.float(), torch.tensor(s.completion_ids), t).tolist()})
        for s, p in zip(batch.samples, prefills, strict=True)]
    return RolloutBatch(header=batch.header, samples=samples)


def sampled_with(lab: Lab, profile: Profile, spec: RunSpec, nonce: int, model, temperature_scale: float = 1.0,
                 top_p: float | None = None) -> RolloutBatch:
    """A file whose completions `model` sampled (in the worker's dtype, at T x `temperature_scale`, at `top_p`),
    declaring the pool's sampling; proofs and logprobs are the sampler's own."""
    honest = lab.honest(spec, nonce, profile.worker_dtype)
    backend = lab._backend(model, DTYPES[profile.worker_dtype])
    params = spec.sampling.model_copy(update={"temperature": spec.sampling.temperature * temperature_scale,
                                              "top_p": spec.sampling.top_p if top_p is None else top_p})
    completions = backend.generate([s.prompt_ids for s in honest.samples], params, [s.seed for s in honest.samples])
    return _with_tokens(lab, spec, honest, completions)


def quantised_weights(model, bits: int = 8, group: int | None = None):
    """Symmetric quantisation of every matrix to `bits` bits (dequantised), one scale per output channel, or per
    `group` consecutive inputs of it (the grouped 4-bit formats GPU inference uses)."""
    levels = 2 ** (bits - 1) - 1
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                rows = p.reshape(-1, group) if group else p
                scale = rows.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / levels
                p.copy_(((rows / scale).round().clamp(-levels, levels) * scale).reshape(p.shape))
    return model


def perturbed_layer(model, layer: int = 0):
    """Every weight of decoder layer `layer` times (1 + 0.01·N(0, 1))."""
    gen = torch.Generator().manual_seed(100 + layer)
    with torch.no_grad():
        for p in model.model.layers[layer].parameters():
            p.mul_(1 + 0.01 * torch.randn(p.shape, generator=gen))
    return model


MODEL_CHANGES: dict[str, Callable] = {
    "int8 weights": quantised_weights,
    "int4 weights (groups of 32)": lambda model: quantised_weights(model, 4, 32),
    "layer 0 x 1.01": perturbed_layer,
}
"""The attackers that sample from a changed copy of the checkpoint (attacks and `logit_errors` share them)."""


def other_weights(lab: Lab):
    with torch.random.fork_rng():
        torch.manual_seed(12345)
        model = lab.fresh_model()
        return type(model)(model.config).float().eval()


def logit_biased(lab: Lab, profile: Profile, spec: RunSpec, nonce: int) -> RolloutBatch:
    """Samples with +1.9 eps on the logits of the tokens of each prompt's answer (the pool's real weights)."""
    honest = lab.honest(spec, nonce, profile.worker_dtype)
    model = lab.fresh_model()
    head = model.get_output_embeddings()
    head.bias = torch.nn.Parameter(torch.zeros(head.weight.shape[0]), requires_grad=False)
    backend = lab._backend(model, DTYPES[profile.worker_dtype])
    bias = 1.9 * profile.verification.logit_tolerance
    completions = []
    g = spec.sampling.group_size
    for begin in range(0, len(honest.samples), g):
        rows = honest.samples[begin : begin + g]
        answer = lab.task.problem(rows[0].prompt_index).answer
        with torch.no_grad():
            head.bias.zero_()
            head.bias[sorted(set(lab.tokenizer.encode(answer, add_special_tokens=False)))] = bias
        completions += backend.generate([s.prompt_ids for s in rows], spec.sampling, [s.seed for s in rows])
    return forged(lab, profile, spec, _with_tokens(lab, spec, honest, completions))


def copied_proofs(lab: Lab, profile: Profile, spec: RunSpec, nonce: int) -> RolloutBatch:
    """Each completion carries the proofs of the next one."""
    honest = lab.honest(spec, nonce, profile.worker_dtype)
    s = honest.samples
    samples = [a.model_copy(update={"proofs": (b.proofs + a.proofs)[: len(a.proofs)]}) for a, b in zip(s, s[1:] + s[:1])]
    return RolloutBatch(header=honest.header, samples=samples)


def own_seeds(lab: Lab, profile: Profile, spec: RunSpec, nonce: int) -> RolloutBatch:
    """Samples with seeds of its choosing (seed grinding inside a file)."""
    honest = lab.honest(spec, nonce, profile.worker_dtype)
    seeds = [7 + i for i in range(len(honest.samples))]
    backend = lab.worker(profile.worker_dtype)[1]
    completions = backend.generate([s.prompt_ids for s in honest.samples], spec.sampling, seeds)
    batch = _with_tokens(lab, spec, honest, completions)
    return RolloutBatch(header=batch.header, samples=[s.model_copy(update={"seed": seed})
                                                      for s, seed in zip(batch.samples, seeds)])


def adversary(name: str) -> Attack:
    """An attack of adversaries.workers on the worker's honest file."""
    def attack(lab: Lab, profile: Profile, spec: RunSpec, nonce: int) -> RolloutBatch:
        policy = Policy(0, bytes(lab.digest), lab.fresh_model(), lab.tokenizer, lab.folder)
        return ATTACKS[name](policy, spec, lab.binding(nonce), lab.honest(spec, nonce, profile.worker_dtype))
    return attack


def changed_model(name: str, forge: bool = False) -> Attack:
    """Files sampled from the checkpoint changed by MODEL_CHANGES[name], with its own proofs or `forge`d ones."""
    def attack(lab: Lab, profile: Profile, spec: RunSpec, nonce: int) -> RolloutBatch:
        batch = sampled_with(lab, profile, spec, nonce, MODEL_CHANGES[name](lab.fresh_model()))
        return forged(lab, profile, spec, batch) if forge else batch
    return attack


def attacks(top_p_spec: RunSpec | None) -> dict[str, Attack]:
    """Every file attack: name -> builder. `top_p_spec`: the pool at top_p 0.9 where the profile allows it."""
    table: dict[str, Attack] = {name: adversary(name) for name in ATTACKS if name != "withheld"}
    table.update({
        "proofs copied from the next completion": copied_proofs,
        "seeds of its own choosing": own_seeds,
        "int8 weights": changed_model("int8 weights"),
        "int8 weights, forged": changed_model("int8 weights", forge=True),
        "int4 weights (groups of 32), forged": changed_model("int4 weights (groups of 32)", forge=True),
        "layer 0 x 1.01": changed_model("layer 0 x 1.01"),
        "layer 0 x 1.01, forged": changed_model("layer 0 x 1.01", forge=True),
        "other weights, forged": lambda lab, pr, spec, n: forged(
            lab, pr, spec, sampled_with(lab, pr, spec, n, other_weights(lab))),
        "T x 0.95, forged": lambda lab, pr, spec, n: forged(
            lab, pr, spec, sampled_with(lab, pr, spec, n, lab.fresh_model(), temperature_scale=0.95)),
        "T x 1.05, forged": lambda lab, pr, spec, n: forged(
            lab, pr, spec, sampled_with(lab, pr, spec, n, lab.fresh_model(), temperature_scale=1.05)),
        "logit bias 1.9 eps on answer tokens, forged": logit_biased,
    })
    if top_p_spec is not None:
        table["out-of-nucleus tokens (top_p 0.9), forged"] = lambda lab, pr, spec, n: forged(
            lab, pr, top_p_spec, sampled_with(lab, pr, top_p_spec, n, lab.fresh_model(), top_p=1.0))
    return table


HOSTILE = ("huge_version_string", "deep_header", "long_integer", "negative_token", "token_bomb")


# ---- how far a sampler's logits are from the checkpoint's ----------------------------------------------------


def logit_errors(lab: Lab, files: int = 4) -> dict[str, float]:
    """RMS difference of each sampler's bf16 logits from the validator's float32 ones on honest completions: the
    honest bf16 worker's (the noise the pool must accept) beside those of the model-changing attacks."""
    contexts = lab.honest_contexts(files)
    reference = [p.logits.float() for p in lab.validator.prefill_batch(contexts)]
    models = {"honest bf16 worker": lab.fresh_model()}
    models.update({name: change(lab.fresh_model()) for name, change in MODEL_CHANGES.items()})
    out = {}
    for name, model in models.items():
        logits = [p.logits.float() for p in lab._backend(model, torch.bfloat16).prefill_batch(contexts)]
        diff = torch.cat([(a - r).flatten() for a, r in zip(logits, reference, strict=True)])
        out[name] = round(float(diff.pow(2).mean().sqrt()), 6)
    return out


# ---- steering among near-ties ----------------------------------------------------------------------------------


def steer(lab: Lab, profile: Profile, spec: RunSpec, nonce: int, budget: int) -> tuple[RolloutBatch, float, float]:
    """A worker that knows the validator's float32 logits and the public noise: per completion, a tree search over
    the tokens the tolerance admits (score gap below the replay's bound) for the highest reward, `budget` rollouts
    of the honest rule per completion. Returns the file (proofs and logprobs by a prefill of the real checkpoint),
    its mean reward gain over the honest rule's completions and their mean reward."""
    honest = lab.honest(spec, nonce, profile.worker_dtype)
    model = lab.validator.model
    s = spec.sampling
    bound = 2 * profile.verification.logit_tolerance / s.temperature + 2 * GUMBEL_TOLERANCE
    stops = set(lab.stops)

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
        text = lab.tokenizer.decode(tokens, skip_special_tokens=True)
        return lab.task.reward(lab.task.problem(row.prompt_index), text, len(tokens))

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
    batch = RolloutBatch(header=honest.header, samples=_rescored(spec, lab.tokenizer, steered))
    return forged(lab, profile, spec, batch), sum(gains) / len(gains), sum(bases) / len(bases)


# ---- running ---------------------------------------------------------------------------------------------------


def rate(k: int, n: int) -> dict:
    low, high = wilson(k, n, Z95)
    return {"k": k, "n": n, "rate": round(k / n, 4) if n else None, "ci95": [round(low, 4), round(high, 4)]}


def run_attacks(lab: Lab, profile: Profile, files: int, names: list[str] | None, console: Console,
                nonce_base: int, workdir: Path | None = None) -> list[dict]:
    """Each attack's files through the validator's checks; the files a check accepts also go into a per-worker
    margin book, one per attack (one attacker submitting them all): after how many files the worker test
    (validator.worker_margins) challenges it, if it does, and its log e-value at the end."""
    spec = profile.spec(lab.spec)
    null = spec.verification.margin_null()
    workdir = workdir or Path(tempfile.mkdtemp(prefix="bench-attacks-books-"))
    top_p_spec = None
    try:
        top_p_spec = spec.model_validate({**spec.model_dump(), "sampling": {**spec.sampling.model_dump(), "top_p": 0.9}})
    except ValueError as exc:
        why = next(line for line in str(exc).splitlines() if "top_p" in line)
        console.print(f"\\[{profile.name}] out-of-nucleus: the pool refuses top_p 0.9: {why.strip()[:300]}")
    rows = []
    table = attacks(top_p_spec)
    for name, build in table.items():
        if names is not None and name not in names:
            continue
        detected, reasons = 0, Counter()
        judged_spec = top_p_spec if name.startswith("out-of-nucleus") else spec
        book = WorkerMargins(workdir / f"{profile.name}-{len(rows)}.json")
        worker_at, log_e = None, None
        for f in range(files):
            outcome = lab.judge(judged_spec, build(lab, profile, spec, nonce_base + f))
            detected += not outcome.ok
            reasons[outcome.reason.name if outcome.reason else ("decoder" if not outcome.ok else "accepted")] += 1
            if outcome.ok and outcome.margins:
                evidence = book.judge(WORKER, f"0x{nonce_base + f:064x}", outcome.margins["tokens"],
                                      outcome.margins["score"], null, spec.verification.worker_false_positive_rate)
                log_e = round(book.log_e_value(WORKER, null), 2)
                worker_at = worker_at or (f + 1 if evidence is not None else None)
        rows.append({"attack": name, **rate(detected, files), "reasons": dict(reasons),
                     "worker_challenged_after_files": worker_at, "worker_log_e_end": log_e})
        console.print(f"\\[{profile.name}] {name}: {detected}/{files} files detected ({dict(reasons)})"
                      + ("" if log_e is None else f"; accepted files' worker log e {log_e}"
                         + (f", challenged after {worker_at} files" if worker_at else "")))
    if names is None:
        honest = encode_rollouts(lab.honest(spec, nonce_base, profile.worker_dtype))
        for name in HOSTILE:
            outcome = lab.judge_bytes(spec, getattr(hostile_files, name)(honest))
            rows.append({"attack": f"hostile bytes: {name}", **rate(int(not outcome.ok), 1),
                         "reasons": {outcome.reason.name if outcome.reason else "decoder": 1}})
    return rows


def run_steering(lab: Lab, profile: Profile, files: int, budget: int, nonce_base: int, workdir: Path) -> dict:
    spec = profile.spec(lab.spec)
    book = WorkerMargins(workdir / f"steering-{profile.name}.json")
    null = spec.verification.margin_null()
    detected = worker_challenged_at = worker_challenges = 0
    gains, bases, log_e = [], [], 0.0
    for f in range(files):
        batch, gain, base = steer(lab, profile, spec, nonce_base + f, budget)
        gains.append(gain)
        bases.append(base)
        outcome = lab.judge(spec, batch)
        if not outcome.ok:
            detected += 1
            continue
        evidence = book.judge(WORKER, f"0x{nonce_base + f:064x}", outcome.margins["tokens"],
                              outcome.margins["score"], null, spec.verification.worker_false_positive_rate)
        log_e = book.log_e_value(WORKER, null)
        worker_challenges += evidence is not None
        if evidence is not None and not worker_challenged_at:
            worker_challenged_at = f + 1
    return {"files": files, "logit_tolerance": profile.verification.logit_tolerance,
            "budget_per_completion": budget, "mean_reward_gain_per_completion": round(
        sum(gains) / len(gains), 4), "honest_mean_reward_per_completion": round(sum(bases) / len(bases), 4),
        **{"file_detection": rate(detected, files)},
        "worker_challenged_after_files": worker_challenged_at or None, "worker_challenges": worker_challenges,
        "worker_log_e_end": round(log_e, 2),
        "worker_log_e_threshold": round(math.log(1 / spec.verification.worker_false_positive_rate), 2)}


@dataclass(frozen=True)
class HonestCell:
    dtype: str
    batch_size: int | None
    prompts: int
    max_tokens: int


def honest_cells(quick: bool) -> list[HonestCell]:
    lengths = (4, 16) if quick else (1, 4, 16, 32)
    return [HonestCell(d, b, p, t) for d in DTYPES for b in (1, None) for p in (1, 2) for t in lengths]


def run_honest(lab: Lab, profiles: list[Profile], files: int, console: Console, workdir: Path) -> dict:
    """`files` honest files over the cells (dtype x batch size x prompts x length), each judged by every profile
    whose workers may use its dtype (fp32: float32 only); one per-worker book per profile."""
    cells = honest_cells(files < 1000)
    out = {p.name: {"files": 0, "false_positives": 0, "completions": 0, "tokens": 0, "reasons": Counter(),
                    "worker_challenged": False} for p in profiles}
    books = {p.name: WorkerMargins(workdir / f"honest-{p.name}.json") for p in profiles}
    start = time.perf_counter()
    for f in range(files):
        cell = cells[f % len(cells)]
        spec = lab.spec.model_copy(update={"prompts_per_submission": cell.prompts, "sampling": lab.spec.sampling.model_copy(
            update={"max_tokens": cell.max_tokens})})
        batch = lab.honest(spec, 1_000_000 + f, cell.dtype, cell.batch_size)
        for profile in profiles:
            if profile.worker_dtype == "float32" and cell.dtype != "float32":
                continue
            judged = profile.spec(spec)
            outcome = lab.judge(judged, batch)
            o = out[profile.name]
            o["files"] += 1
            o["completions"] += len(batch.samples)
            o["tokens"] += outcome.tokens
            if not outcome.ok:
                o["false_positives"] += 1
                o["reasons"][outcome.reason.name] += 1
                console.print(f"\\[{profile.name}] honest FALSE POSITIVE {cell}: {outcome.message[:200]}")
            elif outcome.margins and books[profile.name].judge(
                    WORKER, f"0x{f:064x}", outcome.margins["tokens"], outcome.margins["score"],
                    judged.verification.margin_null(), judged.verification.worker_false_positive_rate) is not None:
                o["worker_challenged"] = True
        if (f + 1) % 500 == 0:
            console.print(f"honest: {f + 1}/{files} files, {time.perf_counter() - start:.0f} s; false positives "
                          f"{ {name: o['false_positives'] for name, o in out.items()} }")
    result = {}
    for p in profiles:
        o = out[p.name]
        low, high = wilson(o["false_positives"], o["files"], Z95)
        log_e = books[p.name].log_e_value(WORKER, p.verification.margin_null())
        result[p.name] = {**{k: v for k, v in o.items() if k != "reasons"}, "reasons": dict(o["reasons"]),
                          "fp_rate": o["false_positives"] / max(o["files"], 1), "fp_rate_upper95": round(high, 6),
                          "worker_log_e_end": round(log_e, 2),
                          "stated_per_file_rate": p.verification.false_positive_rate}
    return result


def run(spec_path: Path, attack_files: int, honest_files: int, steering_files: int, budget: int,
        calibration_prompts: int, names: list[str] | None, console: Console,
        steering_warm_steps: int = ATTACK_WARM_STEPS) -> dict:
    torch.set_num_threads(1)
    spec = load_run_spec(spec_path)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-attacks-") as tmp:
        workdir = Path(tmp)
        folder = build_checkpoint(spec, workdir / "checkpoint", warm_steps=ATTACK_WARM_STEPS)
        console.print(f"calibrating the bf16 profile (validator calibrate --prompts {calibration_prompts})…")
        bf16 = calibrated_profile(folder, spec_path, calibration_prompts)
        fp32 = Profile("fp32", "float32", spec.verification, {"false_positive_rate": spec.verification.false_positive_rate})
        lab = Lab(folder, spec)
        profiles = [fp32, bf16]
        result: dict = {"file": (f"{spec.prompts_per_submission} prompts x {spec.sampling.group_size} completions x "
                                 f"<= {spec.sampling.max_tokens} tokens (examples/run-attacks.toml), every completion "
                                 "checked (q = 1)"),
                        "profiles": {p.name: {"worker_dtype": p.worker_dtype,
                                              "logit_tolerance": p.verification.logit_tolerance,
                                              "margin_tokens": p.verification.margin_tokens,
                                              "stated": p.stated} for p in profiles},
                        "attacks": {}, "steering": {}}
        result["logit_error_rms"] = logit_errors(lab)
        console.print(f"logit error (rms, bf16 against the float32 reference): {result['logit_error_rms']}")
        for i, profile in enumerate(profiles):
            result["attacks"][profile.name] = run_attacks(lab, profile, attack_files, names, console, 10_000 * (i + 1),
                                                          workdir)
        steer_lab, steer_profiles = lab, profiles
        if steering_warm_steps != ATTACK_WARM_STEPS:  # a policy that solves part of the task: room to steer
            steer_folder = build_checkpoint(spec, workdir / "steering-checkpoint", warm_steps=steering_warm_steps)
            console.print(f"steering policy ({steering_warm_steps} warm steps): calibrating its bf16 profile…")
            steer_lab = Lab(steer_folder, spec)
            steer_profiles = [fp32, calibrated_profile(steer_folder, spec_path, calibration_prompts)]
        result["steering_warm_steps"] = steering_warm_steps
        for i, profile in enumerate(steer_profiles):
            result["steering"][profile.name] = run_steering(steer_lab, profile, steering_files, budget,
                                                            50_000 + 1000 * i, workdir)
            console.print(f"\\[{profile.name}] steering: {result['steering'][profile.name]}")
        result["honest"] = run_honest(lab, profiles, honest_files, console, workdir)
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def print_tables(result: dict, console: Console) -> None:
    for name, rows in result["attacks"].items():
        p = result["profiles"][name]
        table = Table(title=f"{name} profile: {p['worker_dtype']} workers, tolerance {p['logit_tolerance']:.4g}; "
                            f"a file = {result['file']}")
        for col in ("attack", "detected", "rate", "Wilson 95 %", "reasons", "worker test on accepted files"):
            table.add_column(col)
        for r in rows:
            worker = "" if r.get("worker_log_e_end") is None else (
                f"log e {r['worker_log_e_end']}" + (f", caught after {r['worker_challenged_after_files']} files"
                                                    if r.get("worker_challenged_after_files") else ""))
            table.add_row(r["attack"], f"{r['k']}/{r['n']}", f"{r['rate']:.3f}", f"[{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]",
                          ", ".join(f"{k}:{v}" for k, v in r["reasons"].items()), worker)
        console.print(table)
        s = result["steering"][name]
        console.print(f"steering ({name}, policy of {result['steering_warm_steps']} warm steps, honest reward "
                      f"{s['honest_mean_reward_per_completion']} per completion): reward gain "
                      f"{s['mean_reward_gain_per_completion']} per completion, files "
                      f"detected {s['file_detection']['k']}/{s['files']}, worker challenged after "
                      f"{s['worker_challenged_after_files']} files, {s['worker_challenges']} times in all (log e at "
                      f"the end {s['worker_log_e_end']} of "
                      f"{s['worker_log_e_threshold']})")
    errors = result["logit_error_rms"]
    honest = errors["honest bf16 worker"]
    console.print("logit error against the float32 reference (rms): " + ", ".join(
        f"{name} {e:.4g} ({e / honest:.2f}x the honest bf16 worker's)" for name, e in errors.items()))
    for name, h in result["honest"].items():
        console.print(f"honest ({name}): {h['false_positives']} false positives in {h['files']} files "
                      f"({h['completions']} completions, {h['tokens']} tokens); rate {h['fp_rate']:.2g}, upper 95 % "
                      f"{h['fp_rate_upper95']:.2g}; stated per-file rate {h['stated_per_file_rate']:g}; worker log e "
                      f"{h['worker_log_e_end']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="bounded form: 5 files per attack, 200 honest files, 3 steering files")
    p.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="run spec TOML (default examples/run-attacks.toml)")
    p.add_argument("--attack-files", type=int, help="files per attack and profile (default 30; --quick 5)")
    p.add_argument("--honest-files", type=int, help="honest files (default 5000; --quick 200)")
    p.add_argument("--steering-files", type=int, help="files of the steering worker (default 20; --quick 3)")
    p.add_argument("--budget", type=int, default=16, help="steering rollouts per completion")
    p.add_argument("--steering-warm-steps", type=int, default=STEERING_WARM_STEPS,
                   help="warm-start steps of the policy the steering worker attacks (default %(default)s: one that "
                        "solves part of the task; the attacks' policy of 25 steps leaves nothing to steer toward)")
    p.add_argument("--calibration-prompts", type=int, help="validator calibrate --prompts (default 512; --quick 128)")
    args = p.parse_args()
    console = Console()
    try:
        result = run(args.spec, args.attack_files or (5 if args.quick else 30),
                     args.honest_files or (200 if args.quick else 5000), args.steering_files or (3 if args.quick else 20),
                     args.budget, args.calibration_prompts or (128 if args.quick else 512), None, console,
                     args.steering_warm_steps)
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    print_tables(result, console)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
