"""The asynchronous GRPO training loop.

Per step s:
  1. collect — take rollout files from the work source until the buffer holds a full batch
     of informative samples: drop files from policies older than s − async_level (stale),
     drop groups whose raw rewards are all equal (zero advantage), compute advantages
     from the rewards per group;
  2. recompute logp_behav for every batch sample with the policy that sampled it (the
     trainer keeps the last async_level + 1 policies, each rank its own shard of each in `retained_dtype`,
     and swaps a past one into the training model to run it); the current policy is π_prox;
  3. `optim.updates_per_step` AdamW updates on the decoupled GRPO loss (trainer/loss.py), one
     per mini-batch of the batch's rows, each gradient-norm clipped, all clipped against π_prox
     (the policy at the start of the step, recomputed once); each update's gradient is
     accumulated over micro-batches of at most micro_batch_tokens positions;
  4. refuse a new policy (step s + 1) that the pool cannot run (`policy_check`: an exact pool's bounds), then
     checkpoint model, optimizer, retained policies, buffer and work-source cursor in one
     atomic commit;
  5. publish the new policy through every publisher hook, and append a metrics line.

Staleness is counted at consumption: a submission made with policy p and first trained on
at step s is s − p steps old, which includes every step it spent waiting for its verdict
(the ledger source hands out only accepted work) and in the trainer's buffer."""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import PreTrainedModel

from protocol.demand import DemandEstimate
from protocol.phases import phase
from trainer.batching import PackedBatch, completion_logprobs, micro_batches, pack
from trainer.config import TrainerConfig
from trainer.exact_behaviour import ExactBehaviour
from trainer.filtering import informative_groups, is_stale
from trainer.loss import LossOutput, grpo_loss, merge_loss_outputs, token_logprobs
from trainer.parallel import Parallel, SingleProcess
from trainer.work_source import WorkItem, WorkSource

# publish(step, state_dict) -> optional digest. The local policy store is one; the IPFS
# checkpoint path (shard, add to Kubo, publishCheckpoint on-chain) is another.
Publisher = Callable[[int, dict[str, torch.Tensor]], object]
# policy_check(model) -> why the pool cannot run this policy, None if it can (trainer.publish.exact_policy_problem).
PolicyCheck = Callable[[PreTrainedModel], str | None]
# evaluate(model) -> metrics merged into the step's metrics line (e.g. held-out accuracy).
Evaluator = Callable[[PreTrainedModel], dict[str, float]]


log = logging.getLogger("proofswarm.trainer")

UNINFORMATIVE_WARNING_FILES = 8
WAITING_LOG_S = 30.0
"""While it waits for a batch the trainer says, this often, what it has and what it lacks."""
"""Files in a row without one informative group after which the trainer warns: the policy solves every
prompt of the task, or none, and there is nothing to learn from until that changes."""


class TrainerStarved(Exception):
    """No usable rollout arrived within the configured wait timeout."""


class UnpublishablePolicy(Exception):
    """A policy the pool cannot run (its `policy_check` says why): the trainer stops before publishing it."""


@dataclass
class BufferedGroup:
    """One informative prompt group waiting to be trained on."""

    policy_step: int
    prompt_ids: list[int]
    completions: list[list[int]]
    worker_logprobs: list[list[float]]
    rewards: list[float]
    advantages: list[float]
    first_of_submission: bool = False  # the first kept group of its rollout file


@dataclass
class StepMetrics:
    """One line of metrics.jsonl."""

    step: int
    loss: float
    policy_loss: float
    entropy: float
    kl: float
    grad_norm: float
    lr: float
    clipped_fraction: float
    delta_clamped_fraction: float
    mean_ratio: float
    is_weight_mean: float
    is_weight_max: float
    is_weight_min: float
    is_truncated_fraction: float
    reward: float | None  # mean over the rollouts taken in since the last step; None if none
    batch_reward: float
    staleness_mean: float
    staleness_max: int
    staleness_histogram: dict[str, int]  # batch groups by staleness (trainer step − policy step)
    submission_staleness: list[int]  # one per submission first trained on in this step
    dropped_stale_groups: int
    dropped_zero_advantage_groups: int
    files_consumed: int
    rejected_files: int
    logprob_mismatch: float
    micro_batches: int  # forward + backward passes of this step on each rank (every rank runs as many)
    idle_s: float
    train_s: float
    wall_s: float
    files_per_step_needed: float | None  # the demand note workers pace on (trainer.demand); None before any file
    buffered_files: float | None
    recent_workers: int


class Trainer:
    """GRPO over a work source; `run()` trains until `max_steps`, resuming if it can."""

    def __init__(
        self,
        config: TrainerConfig,
        model: PreTrainedModel,
        source: WorkSource,
        publishers: list[Publisher] | None = None,
        evaluate: Evaluator | None = None,
        eval_every: int = 0,
        reference: PreTrainedModel | None = None,
        parallel: Parallel | None = None,
        policy_check: PolicyCheck | None = None,
        exact_behaviour: ExactBehaviour | None = None,
    ) -> None:
        self.config = config
        self.parallel = parallel or SingleProcess()
        self.device = next(model.parameters()).device
        """Where the model trains; batches move there (the intake stays on the CPU)."""
        self._model_class, self._model_config = type(model), model.config
        self._full: PreTrainedModel | None = None  # under torch.distributed: a whole copy, built when first needed
        self.model = self.parallel.wrap(model)
        self.source = source
        self.publishers = publishers or []
        self.evaluate = evaluate
        self.eval_every = eval_every
        self.reference = reference
        self.policy_check = policy_check
        self.exact_behaviour = exact_behaviour
        """An exact pool's: every row's logp_behav from the integer policy that sampled it (trainer/exact_behaviour.py)."""
        if config.loss.kl_coef > 0 and reference is None:
            raise ValueError("loss.kl_coef > 0 needs a reference model")
        torch.manual_seed(config.seed)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=config.optim.lr, betas=config.optim.betas, weight_decay=config.optim.weight_decay
        )
        warmup = config.optim.warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0
        )
        self.step = 0
        self.buffer: deque[BufferedGroup] = deque()
        self.policies: dict[int, dict[str, torch.Tensor]] = {}
        """The retained policies: step → this rank's piece of every parameter (Parallel.local_shards)."""
        self.retained_dtype = torch.float32 if exact_behaviour is not None else getattr(torch, config.retained_dtype)
        self._counters = {"stale": 0, "zero_adv": 0, "files": 0, "rejected": 0}
        self._uninformative_streak = 0
        self._reported = dict(self._counters)  # counter values at the last metrics line
        self._consumed_rewards: list[float] = []
        self.demand = DemandEstimate(groups_per_batch=config.batch_samples // config.sampling.group_size)
        self.step_metrics: dict | None = None  # the metrics line of self.step, kept in checkpoints for re-publishing
        self.checkpoint_dir = Path(config.run_dir) / "checkpoints"
        self.metrics_path = Path(config.run_dir) / "metrics.jsonl"

    # -- state ----------------------------------------------------------------------------

    def _snapshot(self) -> dict[str, torch.Tensor]:
        return self.parallel.full_state_dict(self.model)

    @torch.no_grad()
    def _retain_policy(self) -> None:
        """Keep this rank's shard of the current policy, and forget (first) the policies older than
        step − async_level: at most async_level + 1 are held."""
        for old in [s for s in self.policies if s < self.step - self.config.async_level]:
            del self.policies[old]
        self.policies[self.step] = {name: t.to(self.retained_dtype, copy=True)
                                    for name, t in self.parallel.local_shards(self.model).items()}

    @contextmanager
    def _holding(self, step: int) -> Iterator[None]:
        """The training model holds retained policy `step` (this rank's shards, written in place) inside the
        block; the current policy is put back bit for bit after. A collective under FSDP2: every rank enters.
        The current step's policy is the model itself (not its retained, possibly bf16, copy)."""
        if step == self.step:
            yield
            return
        current = {name: t.clone() for name, t in self.parallel.local_shards(self.model).items()}
        try:
            self.parallel.write_local_shards(self.model, self.policies[step])
            yield
        finally:
            self.parallel.write_local_shards(self.model, current)

    def _full_model(self, every_rank: bool = False) -> PreTrainedModel | None:
        """The training model's weights as a whole, unwrapped model: the model itself in one process; under
        torch.distributed a copy gathered on rank 0 (on every rank with `every_rank`), None on the others. A
        collective: every rank calls it."""
        if self.parallel.world_size == 1:
            return self.model
        state = self.parallel.full_state_dict(self.model, every_rank=every_rank)
        if not state:
            return None
        if self._full is None:
            self._full = self._model_class(self._model_config).to(self.device).eval()
        self._full.load_state_dict(state)
        return self._full

    def resume(self) -> bool:
        """Load the newest checkpoint if there is one; True if the trainer resumed."""
        ckpt = self.parallel.load_checkpoint(self.checkpoint_dir, self.model, self.optimizer)
        if ckpt is None:
            return False
        self.scheduler.load_state_dict(ckpt.tensors["scheduler"])
        self.policies = {int(k): {name: t.to(self.device, self.retained_dtype) for name, t in v.items()}
                         for k, v in ckpt.tensors["policies"].items()}
        torch.set_rng_state(ckpt.tensors["rng"])
        self.step = ckpt.step
        self.buffer = deque(BufferedGroup(**g) for g in ckpt.trainer["buffer"])
        self._counters = ckpt.trainer["counters"]
        self.step_metrics = ckpt.trainer.get("step_metrics")
        self._reported = dict(self._counters)
        self.source.restore(ckpt.trainer["source"])
        self._truncate_metrics()
        return True

    def _truncate_metrics(self) -> None:
        # Steps after the checkpoint will be redone; drop their lines so the log stays exact.
        if not self.parallel.is_main or not self.metrics_path.exists():
            return
        lines = [line for line in self.metrics_path.read_text().splitlines() if line.strip()]
        kept = [line for line in lines if json.loads(line)["step"] <= self.step]
        self.metrics_path.write_text("".join(line + "\n" for line in kept))

    def _checkpoint(self) -> None:
        tensors = {
            "scheduler": self.scheduler.state_dict(),
            "policies": self.policies,
            "rng": torch.get_rng_state(),
        }
        trainer = {
            "buffer": [asdict(g) for g in self.buffer],
            "counters": self._counters,
            "source": self.source.state(),
            "step_metrics": self.step_metrics,
        }
        with phase("checkpoint"):
            self.parallel.save_checkpoint(self.checkpoint_dir, self.step, self.model, self.optimizer, tensors, trainer)

    def metrics_at(self, step: int) -> dict | None:
        """The metrics line of `step` if it is the step last trained (what a publisher attaches to its policy)."""
        return self.step_metrics if self.step_metrics is not None and self.step_metrics["step"] == step else None

    def _publish(self) -> None:
        # only rank 0 holds the publishers, and the gather below is a collective: every rank decides alike
        if not self.parallel.max_over_ranks(len(self.publishers)):
            return
        state = self._snapshot()  # a collective: every rank takes part, rank 0 gathers and publishes
        if not self.parallel.is_main:
            return
        with phase("publish"):
            for publish in self.publishers:
                publish(self.step, state)

    def _refuse_unrunnable(self) -> None:
        """UnpublishablePolicy (on every rank) when `policy_check` refuses the policy of this step: raised before the
        policy is checkpointed or published, so a restart resumes from the step before and nothing of this one is
        on IPFS or on-chain."""
        if self.policy_check is None:
            return
        model = self._full_model()

        def problem() -> str | None:
            assert self.policy_check is not None and model is not None
            with phase("policy check"):
                return self.policy_check(model)

        found = self.parallel.from_main(problem)
        if found:
            raise UnpublishablePolicy(f"step {self.step}: the pool cannot run this policy, so it is not published: "
                                      f"{found} (a restart redoes the step from the last checkpoint: change what "
                                      "drove the weights there, e.g. optim.lr)")

    def _poll(self) -> list[WorkItem]:
        return self.parallel.from_main(self.source.poll)

    def _report(self, waiting: bool) -> None:
        if self.parallel.is_main:
            self.source.report(self.step, waiting=waiting)

    # -- intake ---------------------------------------------------------------------------

    def _take(self, item: WorkItem) -> None:
        header = item.batch.header
        self._counters["files"] += 1
        if header.sampling != self.config.sampling:
            # logp_behav and the token budget assume the pool's sampling settings
            self._counters["rejected"] += 1
            return
        rewards = torch.tensor([s.reward for s in item.batch.samples]).view(-1, header.sampling.group_size)
        self._consumed_rewards.extend(rewards.flatten().tolist())
        # a policy the trainer does not hold (too old, or from the future) cannot be recomputed
        if is_stale(header.policy_step, self.step, self.config.async_level) or header.policy_step not in self.policies:
            self._counters["stale"] += item.batch.n_groups
            return
        filtered = informative_groups(rewards, self.config.reward_spread_tol)
        self._counters["zero_adv"] += filtered.dropped_zero_advantage
        self.demand.file_taken(len(filtered.keep), header.worker)
        self._uninformative_streak = 0 if filtered.keep else self._uninformative_streak + 1
        if self._uninformative_streak == UNINFORMATIVE_WARNING_FILES and self.parallel.is_main:
            log.warning("step %d: %d files in a row had no informative group (every group's rewards equal), so "
                        "the policy solves every prompt or none; nothing to train on", self.step,
                        self._uninformative_streak)
        for g in filtered.keep:
            group_size = header.sampling.group_size
            members = item.batch.samples[g * group_size : (g + 1) * group_size]
            self.buffer.append(
                BufferedGroup(
                    policy_step=header.policy_step,
                    prompt_ids=members[0].prompt_ids,
                    completions=[s.completion_ids for s in members],
                    worker_logprobs=[s.logprobs for s in members],
                    rewards=[s.reward for s in members],
                    advantages=filtered.advantages[g].tolist(),
                    first_of_submission=g == filtered.keep[0],
                )
            )

    def _drop_stale_buffered(self) -> None:
        fresh = deque(g for g in self.buffer if not is_stale(g.policy_step, self.step, self.config.async_level))
        self._counters["stale"] += len(self.buffer) - len(fresh)
        self.buffer = fresh

    def ready(self) -> bool:
        """Take in what the source has now; True when a full batch is buffered (the
        synchronous loop generates until this holds, then calls train_step)."""
        self._drop_stale_buffered()
        for item in self._poll():
            self._take(item)
        return len(self.buffer) >= self.config.batch_samples // self.config.sampling.group_size

    def _collect(self) -> float:
        """Fill the buffer to a full batch; returns the seconds spent waiting."""
        needed = self.config.batch_samples // self.config.sampling.group_size
        idle, waiting_since = 0.0, None
        logged_at = time.perf_counter()
        self._drop_stale_buffered()
        while len(self.buffer) < needed:
            with phase("intake"):
                items = self._poll()
            for item in items:
                self._take(item)
            if len(self.buffer) >= needed:
                break
            self._report(waiting=True)
            now = time.perf_counter()
            waiting_since = waiting_since or now
            if self.parallel.from_main(lambda now=now, since=waiting_since: now - since > self.config.wait_timeout_s):
                why = (f": the last {self._uninformative_streak} files had no informative group (every group's "
                       "rewards equal)" if self._uninformative_streak else "")
                raise TrainerStarved(f"no usable rollouts for {self.config.wait_timeout_s:.0f}s at step {self.step}{why}")
            if items:
                waiting_since = now
            if now - logged_at >= WAITING_LOG_S and self.parallel.is_main:
                logged_at = now
                c = self._counters
                log.info("step %d: waiting for work: %d of the %d informative groups a batch needs (files taken %d; "
                         "groups dropped: %d all-equal rewards, %d stale)", self.step + 1, len(self.buffer), needed,
                         c["files"], c["zero_adv"], c["stale"])
            time.sleep(self.config.poll_interval_s)
            idle += time.perf_counter() - now
        self._report(waiting=False)
        return idle

    # -- the step -------------------------------------------------------------------------

    @torch.no_grad()
    def _behaviour_logprobs(self, batch_steps: list[int], policy_of_row: list[int],
                            packed: PackedBatch) -> torch.Tensor:
        """logp_behav of every row of this rank, from the retained policy that sampled it, swapped into the
        training model (`batch_steps`: the policies of the whole batch, the same on every rank, so every rank
        joins each policy's passes). Rows of the current policy are left for the loss, which fills them from the
        training pass itself (π_behav = π_prox = π_θ there) — except in an exact pool, where every row's, the
        current policy's included, is its step's integer policy's (`exact_behaviour`), quantised once a step
        from the float32 weights."""
        logp_behav = torch.full_like(packed.targets, float("nan"), dtype=torch.float32)
        exact = self.exact_behaviour
        steps = sorted(set(batch_steps)) if exact is not None else sorted(set(batch_steps) - {self.step})
        for policy_step in steps:
            index = torch.tensor([i for i, s in enumerate(policy_of_row) if s == policy_step], device=logp_behav.device,
                                 dtype=torch.long)
            if exact is not None:
                if not exact.has(policy_step):
                    with self._holding(policy_step):
                        exact.prepare(policy_step, lambda: self._full_model(every_rank=True))
                if len(index):
                    logp_behav[index] = exact.logprobs(policy_step, _unreachable, packed.rows(index))
            else:
                with self._holding(policy_step):
                    logp_behav[index] = self._logprobs(packed.rows(index), packed)
        if exact is not None:
            exact.keep(self.policies)
        return logp_behav

    def _accumulate(self, mb: PackedBatch, advantages: torch.Tensor, logp_behav: torch.Tensor,
                    logp_ref: torch.Tensor | None, logp_prox: torch.Tensor | None = None,
                    scale: float = 1.0) -> tuple[LossOutput, torch.Tensor]:
        """Forward and backward of one micro-batch: its gradient adds to the others' (the loss is a
        token sum over a constant budget). Returns its loss statistics and its filled logp_behav.
        Without `logp_prox` this pass is the step's first, so its own logp is π_prox's. `scale`
        multiplies the loss for backward only (a mini-batch of 1/n of the batch gets n)."""
        logits = self.model(input_ids=mb.inputs).logits
        if logp_prox is None:
            # π_prox is the policy at the start of this step: the parameters of this very pass
            logp_prox = token_logprobs(logits.detach(), mb.targets, self.config.sampling.temperature)
        logp_behav = torch.where(torch.isnan(logp_behav), logp_prox, logp_behav)
        out = grpo_loss(
            logits, mb.targets, mb.loss_mask, advantages, logp_behav,
            self.config.sampling.temperature, self.config.token_budget, self.config.loss, logp_ref, logp_prox,
        )
        (out.loss * (scale * self.parallel.loss_scale)).backward()
        return out, logp_behav

    def _balanced(self, batch: PackedBatch, budget: int) -> list[slice | None]:
        """micro_batches(batch, budget), then None (a pass over no rows of its own) until this rank has as many
        passes as the rank with the most: ranks may hold different row counts, and under FSDP2/DDP every
        forward and backward is a collective that all ranks must join."""
        own = micro_batches(batch, budget)
        return own + [None] * (self.parallel.max_over_ranks(len(own)) - len(own))

    @torch.no_grad()
    def _logprobs(self, packed: PackedBatch, filler: PackedBatch) -> torch.Tensor:
        """logp of every row of `packed` (maybe none) under the training model as it is, micro-batch by
        micro-batch, balanced over ranks: a rank with fewer passes runs the first row of `filler` (a batch of at
        least one row) for nothing."""
        parts = [torch.empty((0, packed.targets.shape[1]), device=packed.targets.device)]
        for rows in self._balanced(packed, self.config.micro_batch_tokens):
            logp = completion_logprobs(self.model, filler.rows(slice(0, 1)) if rows is None else packed.rows(rows),
                                       self.config.sampling.temperature)
            if rows is not None:
                parts.append(logp)
        return torch.cat(parts)

    def train_step(self) -> StepMetrics:
        """Collect a batch, take one optimizer step, publish and checkpoint."""
        started = time.perf_counter()
        idle = self._collect()
        with phase("train"):
            metrics = self._optimize(started, idle)
        extra: dict[str, float] = {}
        if self.evaluate is not None and self.eval_every and self.step % self.eval_every == 0:
            extra = self._evaluate()
        self.step_metrics = {**asdict(metrics), **extra}
        self._refuse_unrunnable()
        if self.step % self.config.checkpoint_every == 0 or self.step == self.config.max_steps:
            self._checkpoint()
        # Publish after checkpointing: a crash in between re-publishes the same policy on resume,
        # never a different policy under an already published step.
        self._publish()
        if self.parallel.is_main:
            self.metrics_path.parent.mkdir(parents=True, exist_ok=True)
            with self.metrics_path.open("a") as handle:
                handle.write(json.dumps(self.step_metrics) + "\n")
        return metrics

    def _optimize(self, started: float, idle: float) -> StepMetrics:
        """Train on a full buffered batch (the step's update) and return its metrics line."""
        train_started = time.perf_counter()
        needed = self.config.batch_samples // self.config.sampling.group_size
        groups = [self.buffer.popleft() for _ in range(needed)]
        group_of_row = [gi for gi, g in enumerate(groups) for _ in g.completions]
        prompts = [groups[gi].prompt_ids for gi in group_of_row]
        completions = [c for g in groups for c in g.completions]
        advantages = torch.tensor([a for g in groups for a in g.advantages])
        packed = pack(prompts, completions, pad_id=self._model_config.pad_token_id or 0)
        # this rank's share of the rows (all of them in one process)
        mine = self.parallel.rows(len(completions))
        packed = PackedBatch(packed.inputs[mine].to(self.device), packed.targets[mine].to(self.device),
                             packed.loss_mask[mine].to(self.device))
        advantages = advantages[mine].to(self.device)
        policy_of_row = [groups[gi].policy_step for gi in group_of_row]
        logp_behav = self._behaviour_logprobs(policy_of_row, policy_of_row[mine], packed)
        logp_ref = None
        if self.reference is not None:
            with torch.no_grad():
                logp_ref = completion_logprobs(self.reference, packed, self.config.sampling.temperature,
                                               self.config.micro_batch_tokens)

        self.model.train()
        parts = []
        budget = self.config.micro_batch_tokens
        updates = self.config.optim.updates_per_step
        logp_prox = None
        if updates > 1:
            # π_prox of every row, before the first update moves π_θ away from it
            logp_prox = self._logprobs(packed, packed)
            logp_behav = torch.where(torch.isnan(logp_behav), logp_prox, logp_behav)
        # consecutive rows: groups stay whole (their advantages sum to zero) when the sizes allow
        n_rows = packed.inputs.shape[0]
        bounds = [round(u * n_rows / updates) for u in range(updates + 1)]
        grad_norms = []
        passes = 0
        lr = self.optimizer.param_groups[0]["lr"]
        for u in range(updates):
            self.optimizer.zero_grad(set_to_none=True)
            mini = packed.rows(slice(bounds[u], bounds[u + 1]))
            for rows in self._balanced(mini, budget):
                passes += 1
                if rows is None:  # a pass that adds nothing, so that this rank joins the others' collectives
                    first = slice(0, 1)
                    self._accumulate(packed.rows(first), advantages[first], logp_behav[first].clone(),
                                     None if logp_ref is None else logp_ref[first],
                                     None if logp_prox is None else logp_prox[first], scale=0.0)
                    continue
                rows = slice(rows.start + bounds[u], rows.stop + bounds[u])
                part, logp_behav[rows] = self._accumulate(
                    packed.rows(rows), advantages[rows], logp_behav[rows], None if logp_ref is None else logp_ref[rows],
                    None if logp_prox is None else logp_prox[rows], scale=float(updates))
                parts.append(part)
            grad_norms.append(self.parallel.clip_grad_norm(self.model, self.config.optim.max_grad_norm))
            self.optimizer.step()
        # the gradients' memory is free until the next step's backward (the swaps of _holding reuse it)
        self.optimizer.zero_grad(set_to_none=True)
        out = self.parallel.reduce(merge_loss_outputs(parts), float(packed.loss_mask.sum()))
        grad_norm = sum(grad_norms) / len(grad_norms)
        self.scheduler.step()
        self.model.eval()

        worker_logprobs = [lp for g in groups for lp in g.worker_logprobs][mine]
        mismatch = self.parallel.reduce_mean(_worker_trainer_mismatch(worker_logprobs, logp_behav, packed.loss_mask),
                                             float(packed.loss_mask.sum()))
        staleness = [self.step - g.policy_step for g in groups]
        histogram = {str(k): staleness.count(k) for k in sorted(set(staleness))}
        submission_staleness = [self.step - g.policy_step for g in groups if g.first_of_submission]
        rewards = [r for g in groups for r in g.rewards]
        self.step += 1
        consumed_rewards, self._consumed_rewards = self._consumed_rewards, []
        self._retain_policy()
        metrics = StepMetrics(
            step=self.step,
            loss=float(out.loss.detach()),
            policy_loss=out.policy_loss,
            entropy=out.entropy,
            kl=out.kl,
            grad_norm=grad_norm,
            lr=lr,
            clipped_fraction=out.clipped_fraction,
            delta_clamped_fraction=out.delta_clamped_fraction,
            mean_ratio=out.mean_ratio,
            is_weight_mean=out.is_weight_mean,
            is_weight_max=out.is_weight_max,
            is_weight_min=out.is_weight_min,
            is_truncated_fraction=out.is_truncated_fraction,
            reward=sum(consumed_rewards) / len(consumed_rewards) if consumed_rewards else None,
            batch_reward=sum(rewards) / len(rewards),
            staleness_mean=sum(staleness) / len(staleness),
            staleness_max=max(staleness),
            staleness_histogram=histogram,
            submission_staleness=submission_staleness,
            dropped_stale_groups=self._counters["stale"] - self._reported["stale"],
            dropped_zero_advantage_groups=self._counters["zero_adv"] - self._reported["zero_adv"],
            files_consumed=self._counters["files"] - self._reported["files"],
            rejected_files=self._counters["rejected"] - self._reported["rejected"],
            logprob_mismatch=mismatch,
            micro_batches=passes,
            idle_s=idle,
            train_s=time.perf_counter() - train_started,
            wall_s=time.perf_counter() - started,
            **self.demand.note(sum(not is_stale(g.policy_step, self.step, self.config.async_level) for g in self.buffer)),
        )
        self._reported = dict(self._counters)
        return metrics

    def _evaluate(self) -> dict[str, float]:
        """The evaluator on the newest policy, on rank 0, unwrapped (a sharded model needs every rank). Every
        rank calls it."""
        model = self._full_model()

        def run() -> dict[str, float]:
            assert self.evaluate is not None and model is not None
            with phase("eval"):
                return self.evaluate(model)

        return self.parallel.from_main(run)

    def start(self) -> None:
        """Resume from the newest checkpoint (re-publishing its policy, which a crash may have kept
        from being published), or publish the initial policy as step 0."""
        if self.resume():
            self._refuse_unrunnable()
            self._publish()
        else:
            self._retain_policy()
            self._refuse_unrunnable()
            self._publish()
            if self.evaluate is not None and self.eval_every:
                extra = self._evaluate()
                if self.parallel.is_main:
                    self.metrics_path.parent.mkdir(parents=True, exist_ok=True)
                    with self.metrics_path.open("a") as handle:
                        handle.write(json.dumps({"step": 0, **extra}) + "\n")
            self._checkpoint()
        self._report(waiting=False)

    def run(self, on_step: Callable[[StepMetrics], None] | None = None) -> None:
        """start(), then train until config.max_steps."""
        self.start()
        while self.step < self.config.max_steps:
            metrics = self.train_step()
            if on_step is not None:
                on_step(metrics)


def _unreachable() -> PreTrainedModel:
    raise AssertionError("every step's integer policy is prepared before its rows are scored")


def _worker_trainer_mismatch(worker_logprobs: list[list[float]], logp_behav: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean |worker logprob − trainer-recomputed logp_behav| over completion tokens (one list of
    worker logprobs per row): a diagnostic only, the loss never uses the worker's numbers."""
    worker = torch.zeros_like(logp_behav)
    for row, lp in enumerate(worker_logprobs):
        positions = mask[row].nonzero().flatten()[: len(lp)]
        worker[row, positions] = torch.tensor(lp, dtype=torch.float32, device=worker.device)
    return float(((worker - logp_behav).abs() * mask).sum() / mask.sum().clamp(min=1.0))
