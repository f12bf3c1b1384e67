"""The checks on one rollout file, cheapest first (runs inside the validator's worker processes).

    schema      → the bytes are a valid rollout file of a known version, within the pool's bounds
                  (protocol.rollouts.RolloutLimits: rows, lengths, proof sizes) and the policy's vocabulary
    identity    → the file names the submitting worker, the submitted step and that step's
                  on-chain checkpoint, the pool's task and sampling, and n_samples rows
    assignment  → every group answers the prompt the PRF assigns to (worker, step, nonce)
    reward      → every reported reward equals the task verifier's
    completion  → seeds, termination, sampling replay, logprobs and TOPLOC against one prefill
                  of the declared checkpoint (inference.verify)
The first failing check decides the challenge reason; its measured statistics become evidence.
"""

from __future__ import annotations

from pathlib import Path

from inference.policy import load_policy, stop_token_ids
from inference.torch_backend import TorchBackend
from inference.verify import CompletionRecord, VerifyConfig, verify_completions
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import pool_state
from ledger_client.ipfs.checkpoints import PinRetention, fetch_checkpoint
from ledger_client.ipfs.content import fetch_run_spec
from ledger_client.ipfs.kubo import KuboClient
from ledger_client.ipfs.task_subset import fetch_task_subset
from proofs.assignment import assign_prompts
from proofs.sampling import derive_seed, sample_index
from proofs.toploc import Thresholds
from protocol.digest import Digest
from protocol.pool import versions_to_keep
from protocol.rollouts import RolloutBatch, RolloutFileError, RolloutLimits, decode_rollouts
from protocol.runspec import RunSpec
from protocol.verdicts import Reason, clip_text
from tasks.base import Task, assignment_space
from tasks.encoding import encode_prompt
from tasks.registry import build_task
from validator.daemon import CheckOutcome, Submission

CHECK_REASONS = {"tokens": Reason.SCHEMA, "prompt": Reason.ASSIGNMENT, "seed": Reason.SEED,
                 "termination": Reason.TERMINATION, "sampling": Reason.SAMPLING, "logprobs": Reason.LOGPROBS,
                 "toploc": Reason.TOPLOC}
PROOF_CHUNK = 32


class RolloutChecker:
    """Checks rollout files of one pool; caches the run spec and loaded policies by step."""

    def __init__(self, rpc_url: str, deployments: str, kubo_api: str, pool_id: int, cache_dir: Path):
        self.ledger = Ledger.open(rpc_url, deployments)
        self.kubo = KuboClient(kubo_api)
        self.pool_id = pool_id
        self.cache_dir = Path(cache_dir)
        pool = pool_state(self.ledger, pool_id)
        self.spec: RunSpec = fetch_run_spec(self.kubo, pool.task_ref)
        fetch_task_subset(self.kubo, self.spec.task)
        self.task: Task = build_task(self.spec.task)
        self.retention = PinRetention(self.kubo, self.cache_dir / "pins.json", keep=versions_to_keep(pool.async_level))
        self._policies: dict[int, tuple[bytes, TorchBackend, object]] = {}
        v = self.spec.verification
        self.verify_config = VerifyConfig(
            sampling=self.spec.sampling,
            thresholds=Thresholds(min_exp_matches=v.toploc_min_exp_matches, max_mant_err_mean=v.toploc_max_mant_err_mean,
                                  max_mant_err_median=v.toploc_max_mant_err_median),
            logit_tolerance=v.logit_tolerance, min_eos_prob=v.min_eos_prob, chunk=PROOF_CHUNK,
        )
        self.limits = RolloutLimits.for_spec(self.spec, PROOF_CHUNK)

    def _policy(self, step: int, digest: bytes) -> tuple[TorchBackend, object]:
        cached = self._policies.get(step)
        if cached is None or cached[0] != digest:
            fetched = fetch_checkpoint(self.kubo, digest, self.cache_dir / "checkpoints", retention=self.retention)
            model, tokenizer = load_policy(fetched.path)
            backend = TorchBackend(model, eos_token_id=stop_token_ids(model, tokenizer), pad_token_id=tokenizer.pad_token_id)
            self._policies[step] = (digest, backend, tokenizer)
            for old in sorted(self._policies)[: -(self.retention.keep)]:
                del self._policies[old]
        _, backend, tokenizer = self._policies[step]
        return backend, tokenizer

    def check(self, sub: Submission, data: bytes) -> CheckOutcome:
        try:
            batch = decode_rollouts(data, self.limits)
        except RolloutFileError as exc:
            return CheckOutcome(False, Reason.SCHEMA, clip_text(str(exc)))
        ckpt = Digest(self.ledger.pool.checkpoint_at(sub.pool_id, sub.step))
        fail = self._identity(sub, batch, ckpt)
        if fail:
            return fail
        backend, tokenizer = self._policy(sub.step, ckpt)
        fail = self._vocabulary(batch, backend.vocab_size) or self._assignment_and_rewards(batch, tokenizer)
        if fail:
            return fail
        return self._completions(sub, batch, backend, tokenizer)

    @staticmethod
    def _vocabulary(batch: RolloutBatch, vocab_size: int) -> CheckOutcome | None:
        """Token ids outside the policy's vocabulary make the file invalid (before the tokenizer sees them)."""
        bad = [i for i, s in enumerate(batch.samples) if max(s.prompt_ids + s.completion_ids) >= vocab_size]
        if bad:
            return CheckOutcome(False, Reason.SCHEMA, f"{len(bad)} completions have token ids outside the "
                                                      f"vocabulary [0, {vocab_size})", failing_samples=bad)
        return None

    def _identity(self, sub: Submission, batch: RolloutBatch, ckpt: Digest) -> CheckOutcome | None:
        h, spec = batch.header, self.spec
        if h.worker.lower() != sub.worker.lower():
            return CheckOutcome(False, Reason.WRONG_WORKER, f"file names worker {h.worker}, submitted by {sub.worker}")
        if h.policy_step != sub.step:
            return CheckOutcome(False, Reason.WRONG_STEP, f"file is for step {h.policy_step}, submitted for {sub.step}")
        if h.manifest_digest != ckpt:
            return CheckOutcome(False, Reason.WRONG_STEP, f"file declares manifest {str(h.manifest_digest)[:18]}…, "
                                                          f"step {sub.step} is {str(ckpt)[:18]}…")
        if len(batch.samples) != sub.n_samples:
            return CheckOutcome(False, Reason.SAMPLE_COUNT, f"{len(batch.samples)} samples in the file, "
                                                            f"{sub.n_samples} submitted")
        expected = {"task": spec.task.model_dump(), **spec.sampling.model_dump(), "proof_chunk": PROOF_CHUNK}
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
        h = batch.header
        assigned = assign_prompts(self.spec.pool_seed_bytes, h.worker, h.policy_step, h.nonce,
                                  assignment_space(self.task), batch.n_groups)
        g = h.sampling.group_size
        for group, index in enumerate(assigned):
            first = batch.samples[group * g]
            prompt_ids = encode_prompt(tokenizer, self.task.problem(index).prompt)
            if first.prompt_index != index or first.prompt_ids != prompt_ids:
                return CheckOutcome(False, Reason.ASSIGNMENT,
                                    f"group {group} answers prompt {first.prompt_index}, assigned {index}",
                                    failing_samples=list(range(group * g, (group + 1) * g)))
        bad = []
        for i, s in enumerate(batch.samples):
            problem = self.task.problem(s.prompt_index)
            text = tokenizer.decode(s.completion_ids, skip_special_tokens=True)
            if abs(self.task.reward(problem, text, len(s.completion_ids)) - s.reward) > self.spec.verification.reward_tolerance:
                bad.append(i)
        if bad:
            return CheckOutcome(False, Reason.REWARD, f"{len(bad)} of {len(batch.samples)} rewards differ from the "
                                                      f"task verifier's", failing_samples=bad)
        return None

    def _completions(self, sub: Submission, batch: RolloutBatch, backend: TorchBackend, tokenizer) -> CheckOutcome:
        h = batch.header
        records = [CompletionRecord(prompt_ids=s.prompt_ids, completion_ids=s.completion_ids, proofs=s.proofs,
                                    seed=s.seed, finish_reason=s.finish_reason, logprobs=s.logprobs)
                   for s in batch.samples]
        n = len(records)
        seeds = [derive_seed(self.spec.pool_seed_bytes, h.worker, h.policy_step, sample_index(h.nonce, i, n))
                 for i in range(n)]
        verdicts = verify_completions(backend, records, self.verify_config,
                                      expected_prompts=[r.prompt_ids for r in records], expected_seeds=seeds)
        tokens = sum(len(r.completion_ids) for r in records)
        for name, reason in CHECK_REASONS.items():
            failing = [i for i, v in enumerate(verdicts) if (c := v.check(name)) is not None and not c.passed]
            if failing:
                first = verdicts[failing[0]].check(name)
                chunks = {str(i): verdicts[i].check("toploc").details.get("failing_chunks", [])
                          for i in failing if name == "toploc"}
                return CheckOutcome(False, reason, f"{len(failing)} of {n} completions fail {name}: {first.reason}",
                                    failing_samples=failing, failing_chunks=chunks,
                                    statistics={"first_failure": first.details},
                                    thresholds=self.verify_config.thresholds.model_dump(), tokens=tokens)
        return CheckOutcome(True, tokens=tokens)
