"""Trainer configuration: pydantic-settings, from a TOML file, environment variables
(PROOFSWARM_TRAINER_*, nested with __) and command-line flags (`--loss.delta 4`), in
increasing order of precedence."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from protocol.pool import DEFAULT_ASYNC_LEVEL
from protocol.runspec import SamplingSpec
from tasks.registry import TaskSpec
from trainer.options import TINY_HEADS, TINY_HIDDEN, TINY_LAYERS


class LossConfig(BaseModel):
    """Coefficients of the GRPO loss."""

    model_config = ConfigDict(extra="forbid")

    epsilon: float = Field(0.2, gt=0, lt=1, description="PPO clip range: r is clipped to [1-ε, 1+ε]")
    delta: float = Field(4.0, gt=1, description="two-sided clipping: r is clamped to [0, δ] first")
    entropy_coef: float = Field(0.0, ge=0, description="weight of the entropy bonus")
    kl_coef: float = Field(0.0, ge=0, description="weight of the k3 KL to the reference policy")
    is_weight_cap: float = Field(
        2.0, ge=1, description="C: the IS weight π_prox/π_behav is truncated to at most C"
    )


class ModelSpec(BaseModel):
    """Shape of the in-code char-level Llama policy (used when no init checkpoint is given)."""

    model_config = ConfigDict(extra="forbid")

    hidden: int = Field(TINY_HIDDEN, ge=8)
    layers: int = Field(TINY_LAYERS, ge=1)
    heads: int = Field(TINY_HEADS, ge=1)
    init_seed: int = 0


class OptimConfig(BaseModel):
    """AdamW with linear warmup, and gradient-norm clipping."""

    model_config = ConfigDict(extra="forbid")

    lr: float = Field(2e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    betas: tuple[float, float] = (0.9, 0.99)
    warmup_steps: int = Field(10, ge=0)
    max_grad_norm: float = Field(1.0, gt=0)
    updates_per_step: int = Field(
        1, ge=1, description="optimizer updates per trainer step (PPO-style): the batch is cut into this many "
        "mini-batches of consecutive rows (whole groups when the sizes allow), one AdamW update each, all clipped "
        "against π_prox = the policy at the start of the step; the learning-rate schedule advances once per step",
    )


class TrainerConfig(BaseSettings):
    """Everything the GRPO trainer needs; the sampling fields must match the workers'."""

    model_config = SettingsConfigDict(env_prefix="PROOFSWARM_TRAINER_", env_nested_delimiter="__", extra="forbid")

    run_dir: Path = Path("runs/grpo")
    task: TaskSpec = TaskSpec()
    model: ModelSpec = ModelSpec()
    loss: LossConfig = LossConfig()
    optim: OptimConfig = OptimConfig()
    sampling: SamplingSpec = Field(SamplingSpec(), description="must equal the workers' (a pool's run spec sets it)")
    batch_samples: int = Field(128, ge=2, description="informative samples per optimizer step")
    micro_batch_tokens: int = Field(
        1024, ge=1, description="padded positions per forward/backward pass; the step's gradient is accumulated over "
        "micro-batches (same update). Bounds the [tokens, V] logits and their gradient: ~2 × this × V × 4 bytes",
    )
    async_level: int = Field(DEFAULT_ASYNC_LEVEL, ge=0, description="rollouts from policies older than step − k are dropped")
    reward_spread_tol: float = Field(
        0.0, ge=0, le=0, description="deprecated, must be 0: a group is informative when its rewards are not all "
        "equal, compared exactly (rewards are exact float32 values, tasks.rewards)"
    )
    retained_dtype: Literal["bfloat16", "float32"] = Field(
        "bfloat16", description="the past policies kept to recompute logp_behav (the last async_level + 1), each "
        "rank its own FSDP2 shard: bfloat16 halves them (2 B a parameter) and holds the very weights a worker running "
        "the policy in bfloat16 computes with; float32 holds the published float32 weights bit for bit. An exact pool keeps float32 whatever this says "
        "(its integer policies are quantised from the published float32 weights). docs/scaling.md",
    )
    max_steps: int = Field(100, ge=1)
    checkpoint_every: int = Field(1, ge=1)
    poll_interval_s: float = Field(0.02, gt=0)
    wait_timeout_s: float = Field(600.0, gt=0, description="give up when no usable rollout arrives for this long")
    seed: int = 0
    decode_workers: int = Field(
        0, ge=0, description="`trainer start`: processes that decode (parse and validate) the accepted rollout files "
        "beside the training loop, in order; 0 or 1: in the trainer's own process. For a large pool on a machine with "
        "cores to spare: on 2 loaded cores a pool of 2 was 0.79x in process (docs/scaling.md)")
    parallel: Literal["fsdp", "ddp"] = Field(
        "fsdp", description="with --nproc N > 1: FSDP2 (sharded) or DDP (replicated) data parallelism")

    @model_validator(mode="after")
    def _whole_groups(self) -> TrainerConfig:
        group_size = self.sampling.group_size
        if group_size < 2:
            raise ValueError("GRPO needs sampling.group_size >= 2 (advantages are relative to the group)")
        if self.sampling.temperature <= 0:
            raise ValueError("the trainer learns from sampled completions: sampling.temperature must be > 0")
        if self.batch_samples % group_size:
            raise ValueError(f"batch_samples ({self.batch_samples}) must be a multiple of group_size ({group_size})")
        return self

    @property
    def token_budget(self) -> int:
        """The constant divisor of the token-level loss."""
        return self.batch_samples * self.sampling.max_tokens
