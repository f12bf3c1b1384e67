"""The checks on one rollout file, cheapest first (runs inside the validator's worker processes).

    schema      → the bytes are a valid rollout file of a known version, within the pool's bounds
                  (protocol.rollouts.RolloutLimits: rows, lengths, proof sizes) and the policy's vocabulary
    identity    → the file is bound to this submission (chain id, pool contract, pool id, worker,
                  step, nonce; a batched leaf: WorkBatches, `epoch << 32 | counter` and the epoch's beacon, R3.9),
                  names that step's on-chain checkpoint, the pool's task and
                  sampling; n_samples is the run spec's prompts × group size and the file's rows
    assignment  → every group answers the prompt the PRF assigns to (worker, nonce)
    reward      → every reported reward equals the task verifier's
    completion  → on every completion: seeds, token ranges, EOS placement; on the spot-checked
                  m = ceil(q·n) of them (protocol.spotcheck, q = the pool's spotCheckBps): termination,
                  sampling replay and TOPLOC against one prefill of the declared checkpoint
                  (inference.verify); in an exact pool (run spec `inference = "exact"`) instead the replay
                  of every checked token with tolerance zero on the checkpoint's integer form
                  (inference.exact.deviation), and nothing after it; a step whose checkpoint exact mode cannot
                  run (`UnrunnablePolicy`, the trainer's fault) gets no verdict (CheckOutcome.no_verdict)
    margins     → the spot-checked tokens' margins against the pool's calibrated null (proofs.margins): the
                  statistical test of the sampler, per file and per completion; the file's (tokens, margin sum)
                  go back to the daemon, which accumulates them per worker
The first failing check decides the challenge reason; its measured statistics become evidence, with
the spot-checked indices and the randomness they were drawn from.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch

from inference.backend import InferenceBackend, InferenceError
from inference.exact import Deviation, deviation, quantise_policy
from inference.exact_backend import ExactBackend
from inference.policy import PolicyLoader, stop_token_ids
from inference.torch_backend import TorchBackend
from inference.verify import (
    DEFAULT_MAX_BATCH_TOKENS,
    CompletionRecord,
    VerifyConfig,
    file_chunk_count_test,
    file_margin_test,
    verify_completions,
)
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import pool_state
from ledger_client.ipfs.checkpoints import PinRetention, fetch_checkpoint
from ledger_client.ipfs.content import fetch_run_spec
from ledger_client.ipfs.kubo import KuboClient
from proofs.assignment import assign_prompts
from proofs.sampling import derive_seed, sample_index
from protocol.digest import Digest, hex_text
from protocol.phases import phase
from protocol.pool import versions_to_keep
from protocol.rollouts import RolloutBatch, RolloutFileError, RolloutLimits, decode_rollouts
from protocol.rescoring import misscored_samples
from protocol.runspec import RunSpec, UnrunnablePolicy, usable_task
from protocol.spotcheck import MAX_BPS, spot_check_indices, spot_check_randomness
from protocol.verdicts import Reason, clip_text
from tasks.base import Task, assignment_space
from tasks.encoding import encode_prompt
from tasks.registry import build_task
from validator.config import DaemonConfig
from validator.outcome import CheckOutcome, Submission

CHECK_REASONS = {"tokens": Reason.SCHEMA, "prompt": Reason.ASSIGNMENT, "seed": Reason.SEED,
                 "termination": Reason.TERMINATION, "sampling": Reason.SAMPLING,
                 "toploc": Reason.TOPLOC}
PROOF_CHUNK = 32
DEFAULT_CHECKER_THREADS = 1
"""Torch threads of one checker process. On the 2-core VM next to anvil, Kubo and workers, a check with
torch's default threads (one per core) ran 14.7× slower than on one (bench.validator --q 1,
docs/notes/validator.md): more cores are used by more checker processes (`validator start --processes`)."""


class RolloutChecker:
    """Checks rollout files of one pool; caches the run spec and loaded policies by step. A file is judged by the
    rules of its policy: the run spec's, loosened by the tolerances its manifest carries (RunSpec.verification_for)."""

    def __init__(self, rpc_url: str, deployments: str, kubo_api: str, pool_id: int, cache_dir: Path,
                 max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS, device: str = "cpu"):
        self.device = device
        """Where the float32 reference prefill runs (the policy's model is moved there)."""
        self.ledger = Ledger.open(rpc_url, deployments)
        self.kubo = KuboClient(kubo_api)
        self.pool_id = pool_id
        self.cache_dir = Path(cache_dir)
        pool = pool_state(self.ledger, pool_id)
        self.spot_check_bps = pool.spot_check_bps
        self.spec: RunSpec = fetch_run_spec(self.kubo, pool.task_ref)
        self.task: Task = build_task(self.spec.task)
        self.retention = PinRetention(self.kubo, self.cache_dir / "pins.json", keep=versions_to_keep(pool.async_level))
        self._policies: dict[int, tuple[bytes, InferenceBackend, object, VerifyConfig]] = {}
        self._unrunnable: dict[bytes, str] = {}
        """Checkpoint digest → why exact mode cannot run it (`UnrunnablePolicy`), so that it is loaded once."""
        self._load_policy = PolicyLoader()
        self._checkpoints: dict[int, Digest] = {}
        self.max_batch_tokens = max_batch_tokens
        self.proof_chunk = proof_chunk_of(self.spec)
        self.limits = RolloutLimits.for_spec(self.spec, self.proof_chunk)

    def _checkpoint_at(self, step: int) -> Digest:
        """The manifest digest published for `step` (zero if none); a published one never changes (the
        contract only appends), so it is read from the chain once."""
        digest = self._checkpoints.get(step)
        if digest is None:
            digest = Digest(self.ledger.pool.checkpoint_at(self.pool_id, step))
            if any(digest):
                self._checkpoints[step] = digest
        return digest

    def _block_hash(self, number: int) -> Digest:
        """The hash of block `number` of the pool's chain (a submission's seed block)."""
        return Digest(bytes(self.ledger.w3.eth.get_block(number)["hash"]))

    def _policy(self, step: int, digest: bytes) -> tuple[InferenceBackend, object, VerifyConfig]:
        """The reference backend, tokenizer and rules of `step`'s checkpoint; UnrunnablePolicy when the pool is exact
        and exact mode cannot run it."""
        if digest in self._unrunnable:
            raise UnrunnablePolicy(self._unrunnable[digest])
        cached = self._policies.get(step)
        if cached is None or cached[0] != digest:
            with phase("fetch weights"):
                fetched = fetch_checkpoint(self.kubo, digest, self.cache_dir / "checkpoints", retention=self.retention)
                model, tokenizer = self._load_policy(fetched.path)
            try:
                backend = reference_backend(self.spec, model, tokenizer, self.device)
            except UnrunnablePolicy as exc:
                self._unrunnable[bytes(digest)] = str(exc)
                raise
            rules = self.spec.verification_for(fetched.manifest.verification)
            config = verify_config_of(self.spec.model_copy(update={"verification": rules}), self.max_batch_tokens)
            self._policies[step] = (digest, backend, tokenizer, config)
            for old in sorted(self._policies)[: -(self.retention.keep)]:
                if old != step:  # an old step asked for now (a dispute) stays until a newer one is loaded
                    del self._policies[old]
        _, backend, tokenizer, config = self._policies[step]
        return backend, tokenizer, config

    def check(self, sub: Submission, data: bytes) -> CheckOutcome:
        with phase("check"):
            return self._check(sub, data)

    def _check(self, sub: Submission, data: bytes) -> CheckOutcome:
        try:
            batch = decode_rollouts(data, self.limits)
        except RolloutFileError as exc:
            return CheckOutcome(False, Reason.SCHEMA, clip_text(str(exc)))
        ckpt = self._checkpoint_at(sub.step)
        fail = self._identity(sub, batch, ckpt)
        if fail:
            return fail
        try:
            backend, tokenizer, config = self._policy(sub.step, ckpt)
        except UnrunnablePolicy as exc:
            return CheckOutcome(False, message=clip_text(f"step {sub.step}'s policy cannot run in exact mode ({exc}): "
                                                         "the trainer's fault, not the worker's"), no_verdict=True)
        return check_contents(self.spec, self.task, config, self.spot_check_bps, sub, batch, backend, tokenizer)

    def _identity(self, sub: Submission, batch: RolloutBatch, ckpt: Digest) -> CheckOutcome | None:
        h, spec = batch.header, self.spec
        if h.worker.lower() != sub.worker.lower():
            return CheckOutcome(False, Reason.WRONG_WORKER, f"file names worker {h.worker}, submitted by {sub.worker}")
        if h.policy_step != sub.step:
            return CheckOutcome(False, Reason.WRONG_STEP, f"file is for step {h.policy_step}, submitted for {sub.step}")
        d = self.ledger.deployment
        contract = sub.contract or d.compute_pool  # a batched leaf is bound to WorkBatches (R3.9)
        bound = {"chain_id": (h.chain_id, d.chain_id), "pool_contract": (h.pool_contract.lower(), contract.lower()),
                 "pool_id": (h.pool_id, sub.pool_id), "nonce": (h.nonce, sub.nonce)}
        wrong = {k: {"file": a, "chain": b} for k, (a, b) in bound.items() if a != b}
        if wrong:
            return CheckOutcome(False, Reason.WRONG_BINDING, f"file is bound to another submission: {sorted(wrong)}",
                                statistics=wrong)
        if sub.seed_hash is not None:
            if bytes(h.seed_block_hash) != sub.seed_hash:
                return CheckOutcome(False, Reason.WRONG_BINDING, f"file is seeded by {h.seed_block_hash}, not by its "
                                                                 f"epoch's beacon {hex_text(sub.seed_hash)}")
        elif h.seed_block_hash != self._block_hash(sub.seed_block):
            return CheckOutcome(False, Reason.WRONG_BINDING, f"file is seeded by block hash {h.seed_block_hash}, not "
                                                             f"by its pin, block {sub.seed_block}")
        if h.manifest_digest != ckpt:
            return CheckOutcome(False, Reason.WRONG_STEP, f"file declares manifest {h.manifest_digest}, "
                                                          f"step {sub.step} is {ckpt}")
        per_work = spec.prompts_per_submission * spec.sampling.group_size
        if sub.n_samples != per_work:
            return CheckOutcome(False, Reason.SAMPLE_COUNT, f"{sub.n_samples} samples submitted, the run spec's "
                                                            f"submission holds {per_work}")
        if len(batch.samples) != sub.n_samples:
            return CheckOutcome(False, Reason.SAMPLE_COUNT, f"{len(batch.samples)} samples in the file, "
                                                            f"{sub.n_samples} submitted")
        expected = {"task": spec.task.model_dump(), **spec.sampling.model_dump(), "proof_chunk": self.proof_chunk}
        got = {"task": h.task.model_dump(), **h.sampling.model_dump(), "proof_chunk": h.proof_chunk}
        wrong = {k: (got[k], v) for k, v in expected.items() if got[k] != v}
        if wrong:
            sampled_otherwise = bool({"temperature", "top_p"} & set(wrong))
            return CheckOutcome(False, Reason.SAMPLING if sampled_otherwise else Reason.SCHEMA,
                                f"file does not follow the pool's run spec: {sorted(wrong)}",
                                statistics={k: {"file": a, "pool": b} for k, (a, b) in wrong.items()})
        if (h.nonce + 1) * len(batch.samples) > 2**64:
            return CheckOutcome(False, Reason.SCHEMA, f"nonce {h.nonce} leaves no 64-bit sample index for its rows")
        if batch.n_groups != spec.prompts_per_submission:
            return CheckOutcome(False, Reason.ASSIGNMENT, f"{batch.n_groups} prompt groups, the pool assigns "
                                                          f"{spec.prompts_per_submission}")
        return None

    def _assignment_and_rewards(self, batch: RolloutBatch, tokenizer) -> CheckOutcome | None:
        return check_assignment_and_rewards(self.spec, self.task, batch, tokenizer)


def proof_chunk_of(spec: RunSpec) -> int:
    """Tokens per TOPLOC proof in the pool's files: 0 (no proofs) in exact pools."""
    return 0 if spec.inference == "exact" else PROOF_CHUNK


def reference_backend(spec: RunSpec, model, tokenizer, device: str = "cpu") -> InferenceBackend:
    """What the validator recomputes a file with: the float model in a float pool, its integer form
    (inference.exact.quantise_policy) in an exact one, UnrunnablePolicy if it has none; on `device`."""
    eos = stop_token_ids(model, tokenizer)
    if spec.inference == "exact":
        try:
            return ExactBackend(quantise_policy(model).to(device), eos, tokenizer.pad_token_id)
        except InferenceError as exc:
            raise UnrunnablePolicy(str(exc)) from None
    return TorchBackend(model, eos_token_id=eos, pad_token_id=tokenizer.pad_token_id, device=device)


def check_vocabulary(batch: RolloutBatch, vocab_size: int) -> CheckOutcome | None:
    """Token ids outside the policy's vocabulary make the file invalid (before the tokenizer sees them)."""
    bad = [i for i, s in enumerate(batch.samples) if max(s.prompt_ids + s.completion_ids) >= vocab_size]
    if bad:
        return CheckOutcome(False, Reason.SCHEMA, f"{len(bad)} completions have token ids outside the "
                                                  f"vocabulary [0, {vocab_size})", failing_samples=bad)
    return None


def check_assignment_and_rewards(spec: RunSpec, task: Task, batch: RolloutBatch, tokenizer) -> CheckOutcome | None:
    """Every group answers the prompt the PRF assigns to (worker, nonce); every reward is the task verifier's."""
    h = batch.header
    assigned = assign_prompts(spec.pool_seed_bytes, h.worker, h.nonce, assignment_space(task),
                              batch.n_groups)
    g = h.sampling.group_size
    for group, index in enumerate(assigned):
        first = batch.samples[group * g]
        prompt_ids = encode_prompt(tokenizer, task.problem(index).prompt)
        if first.prompt_index != index or first.prompt_ids != prompt_ids:
            return CheckOutcome(False, Reason.ASSIGNMENT,
                                f"group {group} answers prompt {first.prompt_index}, assigned {index}",
                                failing_samples=list(range(group * g, (group + 1) * g)))
    bad = misscored_samples(task, tokenizer, batch)
    if bad:
        return CheckOutcome(False, Reason.REWARD, f"{len(bad)} of {len(batch.samples)} rewards differ from the "
                                                  f"task verifier's", failing_samples=bad)
    return None


def check_contents(spec: RunSpec, task: Task, config: VerifyConfig, spot_check_bps: int, sub: Submission,
                   batch: RolloutBatch, backend: InferenceBackend, tokenizer) -> CheckOutcome:
    """The checks after the file's identity (which needs the chain): vocabulary, assignment, rewards, then the
    completion checks (`check_completions`, or `check_exact_completions` in an exact pool). bench.attacks runs
    them on files it never submits."""
    fail = check_vocabulary(batch, backend.vocab_size) or check_assignment_and_rewards(spec, task, batch, tokenizer)
    if fail:
        return fail
    if isinstance(backend, ExactBackend):
        return check_exact_completions(spec, config, spot_check_bps, sub, batch, backend)
    return check_completions(spec, config, spot_check_bps, sub, batch, backend)


def checker_process(threads: int | None, *args, **kwargs) -> RolloutChecker:
    """The checker of one checker process (validator.checker_pool's factory): that process's torch runs
    `threads` threads (None: torch's default, one per core), then RolloutChecker(*args, **kwargs)."""
    if threads is not None:
        torch.set_num_threads(threads)
    return RolloutChecker(*args, **kwargs)


def check_pool_task(ledger: Ledger, pool_id: int, kubo_api: str) -> None:
    """Build the pool's task as the checkers will (protocol.runspec.usable_task): TaskUnavailable when this machine
    cannot recompute its rewards (a verifiers environment missing, at another version, or refused)."""
    with KuboClient(kubo_api) as kubo:
        spec = fetch_run_spec(kubo, pool_state(ledger, pool_id).task_ref)
    task = usable_task(spec)
    if hasattr(task, "close"):
        task.close()  # this process only checks; the checker processes score with their own scoring children


def checker_factory(config: DaemonConfig, rpc_url: str, deployments: str, threads: int | None = None,
                    max_batch_tokens: int | None = None) -> Callable[[], RolloutChecker]:
    """What each checker process of `validator start` runs to build its checker (picklable: the processes are
    spawned): `threads` torch threads (None: DEFAULT_CHECKER_THREADS; 0: torch's default), the reference prefill
    on `config.device`, in batches of `max_batch_tokens` (None: the default)."""
    threads = DEFAULT_CHECKER_THREADS if threads is None else threads or None
    options = {} if max_batch_tokens is None else {"max_batch_tokens": max_batch_tokens}
    return functools.partial(checker_process, threads, rpc_url, deployments, config.kubo_api, config.pool_id,
                             config.state_dir / "cache", device=config.device, **options)


def verify_config_of(spec: RunSpec, max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS) -> VerifyConfig:
    """The completion checks' parameters that the run spec states, with the validator's own prefill batch
    bound."""
    v = spec.verification
    return VerifyConfig(sampling=spec.sampling, thresholds=v.toploc_thresholds(), logit_tolerance=v.logit_tolerance,
                        min_eos_prob=v.min_eos_prob, chunk=PROOF_CHUNK, max_batch_tokens=max_batch_tokens,
                        margin_null=v.margin_null(), false_positive_rate=v.false_positive_rate)


def spot_check_of(sub: Submission, n: int, bps: int, completion_tokens: list[int] | None = None,
                  min_checked_tokens: int = 0) -> dict:
    """The completions of an n-completion file that get the expensive checks at q = bps / 10000 and the run spec's
    floor of checked tokens (each completion's token count in `completion_tokens`), with the randomness they come
    from (protocol.verdicts.SpotCheck fields). Below q = 1 the daemon must have set the hash of block B + 1 on the
    submission."""
    if bps >= MAX_BPS:
        return {"spot_check_bps": bps, "n": n, "m": n, "indices": list(range(n))}
    if sub.spot_block_hash is None:
        raise RuntimeError("spot check below q = 1 without the seeding block hash")
    randomness = spot_check_randomness(sub.spot_block_hash, sub.work_id)
    indices = spot_check_indices(randomness, n, bps, completion_tokens, min_checked_tokens)
    floor = {"min_checked_tokens": min_checked_tokens, "completion_tokens": completion_tokens} \
        if min_checked_tokens else {}
    return {"spot_check_bps": bps, "n": n, "m": len(indices), "indices": indices, "submission_block": sub.spot_block,
            "block_hash": hex_text(sub.spot_block_hash), "randomness": hex_text(randomness)} | floor


def _records_and_seeds(spec: RunSpec, batch: RolloutBatch) -> tuple[list[CompletionRecord], list[int]]:
    """The file's completions as the checks read them, and the seed each must have been sampled with."""
    h = batch.header
    records = [CompletionRecord(prompt_ids=s.prompt_ids, completion_ids=s.completion_ids, proofs=s.proofs,
                                seed=s.seed, finish_reason=s.finish_reason)
               for s in batch.samples]
    n = len(records)
    seeds = [derive_seed(spec.pool_seed_bytes, h.worker, h.seed_block_hash, sample_index(h.nonce, i, n))
             for i in range(n)]
    return records, seeds


def _first_failed_check(verdicts: list, config: VerifyConfig, spot: dict, tokens: int,
                        checked: int) -> CheckOutcome | None:
    """The challenge of the first check (in CHECK_REASONS' order) that some completion fails; None if none does."""
    n = len(verdicts)
    for name, reason in CHECK_REASONS.items():
        failing = [i for i, v in enumerate(verdicts) if (c := v.check(name)) is not None and not c.passed]
        if failing:
            first = verdicts[failing[0]].check(name)
            chunks = {str(i): verdicts[i].check("toploc").details.get("failing_chunks", [])
                      for i in failing if name == "toploc"}
            return CheckOutcome(False, reason, f"{len(failing)} of {n} completions fail {name}: {first.reason}",
                                failing_samples=failing, failing_chunks=chunks,
                                statistics={"first_failure": first.details},
                                thresholds=config.thresholds.model_dump(), spot_check=spot,
                                tokens=tokens, checked_tokens=checked)
    return None


def check_exact_completions(spec: RunSpec, config: VerifyConfig, spot_check_bps: int, sub: Submission,
                            batch: RolloutBatch, backend: ExactBackend) -> CheckOutcome:
    """An exact pool's completion checks: seeds and structure on all n completions, then on the spot-checked m
    the replay with tolerance zero on the integer policy (docs/protocol.md R5.8). The first completion with a
    token that is not the rule's draw is challenged for SAMPLING, its evidence the `exact_deviation`: the
    completion, the position, the expected and the worker's token, their Q16 logits and scores."""
    records, seeds = _records_and_seeds(spec, batch)
    spot = spot_check_of(sub, len(records), spot_check_bps, [len(r.completion_ids) for r in records],
                         spec.verification.min_checked_tokens)
    verdicts = verify_completions(backend, records, config, expected_prompts=[r.prompt_ids for r in records],
                                  expected_seeds=seeds, spot_check=[])
    tokens = sum(len(r.completion_ids) for r in records)
    checked = sum(len(records[i].completion_ids) for i in spot["indices"])
    fail = _first_failed_check(verdicts, config, spot, tokens, checked)
    if fail:
        return fail
    for i in spot["indices"]:
        r = records[i]
        found = deviation(backend.policy, r.prompt_ids, r.completion_ids, r.seed, spec.sampling.temperature)
        if found is not None:
            return CheckOutcome(False, Reason.SAMPLING,
                                f"completion {i}, token {found.position}: the worker's {found.got} (score "
                                f"{found.got_score}) is not the exact replay's draw {found.expected} (score "
                                f"{found.expected_score})",
                                failing_samples=[i], statistics={"exact_deviation": exact_evidence(i, found)},
                                spot_check=spot, tokens=tokens, checked_tokens=checked)
    return CheckOutcome(True, spot_check=spot, tokens=tokens, checked_tokens=checked)


def exact_evidence(completion: int, found: Deviation) -> dict[str, int]:
    """The evidence of an exact pool's SAMPLING challenge: the completion's index in the file, then the
    deviation's fields (position, expected and worker's token, their Q16 logits and scores); integers anyone
    recomputes from the checkpoint and the file."""
    return {"completion": completion, **asdict(found)}


def check_completions(spec: RunSpec, config: VerifyConfig, spot_check_bps: int, sub: Submission,
                      batch: RolloutBatch, backend: TorchBackend) -> CheckOutcome:
    """The completion checks of a decoded file whose identity, assignment and rewards passed: seeds and
    structure on all n completions, prefill-based checks on the spot-checked m (`spot_check_of`)."""
    records, seeds = _records_and_seeds(spec, batch)
    n = len(records)
    spot = spot_check_of(sub, n, spot_check_bps, [len(r.completion_ids) for r in records],
                         spec.verification.min_checked_tokens)
    verdicts = verify_completions(backend, records, config, expected_prompts=[r.prompt_ids for r in records],
                                  expected_seeds=seeds, spot_check=spot["indices"])
    tokens = sum(len(r.completion_ids) for r in records)
    checked = sum(len(records[i].completion_ids) for i in spot["indices"])
    fail = _first_failed_check(verdicts, config, spot, tokens, checked)
    if fail:
        return fail
    count = file_chunk_count_test(verdicts, config)
    if count is not None and not count.passed:
        return CheckOutcome(False, Reason.TOPLOC,
                            f"{count.exceeding} of {count.chunks} checked chunks exceed their length's honest 90 % "
                            f"level (an honest file ~{count.expected:.1f}; bound {math.exp(count.log_p_value):.2e}, "
                            f"challenged below {count.false_positive_rate:.0e}): the hidden states are off the "
                            "calibrated workers'",
                            statistics={"chunk_count_test": asdict(count)}, thresholds=config.thresholds.model_dump(),
                            spot_check=spot, tokens=tokens, checked_tokens=checked)
    test = file_margin_test(verdicts, [tuple(r.prompt_ids) for r in records], config)
    margins = {} if test is None else {"tokens": test.tokens, "score": test.score, "prompt_tokens": test.prompt_tokens,
                                       "null": config.margin_null.model_dump(),
                                       "worker_false_positive_rate": spec.verification.worker_false_positive_rate}
    if test is not None and not test.passed:
        return CheckOutcome(False, Reason.SAMPLING,
                            f"the sampler's margins are off the honest distribution: {test.score:.3f} over "
                            f"{test.tokens} tokens (bound {math.exp(test.log_p_value):.2e}, worst completion "
                            f"{math.exp(test.worst_completion_log_p_value):.2e}; challenged below "
                            f"{test.false_positive_rate:.0e})",
                            failing_samples=[] if test.worst_completion is None else [test.worst_completion],
                            statistics={"margin_test": test.model_dump()},
                            thresholds={"margin_null": config.margin_null.model_dump()}, spot_check=spot,
                            tokens=tokens, checked_tokens=checked, margins=margins)
    return CheckOutcome(True, spot_check=spot, tokens=tokens, checked_tokens=checked, margins=margins)
