"""`python -m worker.local_cli --config run.toml`: a worker process for local runs.

It follows the newest policy in `<run_dir>/policy`, generates rollout files for its
assigned prompts into `<run_dir>/rollouts`, and paces itself on the trainer's progress
report so that it runs at most `async_level` steps ahead:

  * async_level k ≥ 1: generate while fewer than k·files_per_step files wait unconsumed,
    files_per_step being what the trainer has needed so far (online filtering drops
    uninformative groups, so a step can take several files);
  * async_level 0 (synchronous): generate only when nothing waits, the trainer is waiting
    for data, and the newest policy is the trainer's current one.

With `inference = "exact"` it samples from each policy's integer form (inference.exact, docs/protocol.md R5.7), as
an exact pool's workers do: files without TOPLOC proofs, logprobs those of the integer policy.

It stops when `<run_dir>/trainer.done` appears (or after --max-files files).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Literal

import torch
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from transformers import AutoTokenizer, PreTrainedModel

from cli.errors import one_line_errors
from cli.options import load_settings, pop_option
from inference.backend import InferenceBackend, InferenceError
from inference.local_store import (
    DONE_MARKER,
    PolicyStoreError,
    latest_policy,
    load_local_policy,
    load_policy_weights,
    read_progress,
)
from inference.torch_backend import TorchBackend
from proofs.assignment import assign_prompts
from protocol.pool import DEFAULT_ASYNC_LEVEL
from protocol.rollouts import write_rollout_file
from protocol.runspec import SamplingSpec
from protocol.submission import local_binding
from tasks.base import TaskError, assignment_space
from tasks.registry import TaskSpec, build_task
from worker.produce import exact_backend
from worker.rollouts import make_rollouts


class LocalWorkerConfig(BaseSettings):
    """Local worker settings; the sampling fields must match the trainer's."""

    model_config = SettingsConfigDict(env_prefix="PROOFSWARM_WORKER_", env_nested_delimiter="__", extra="forbid")

    run_dir: Path = Path("runs/grpo")
    task: TaskSpec = TaskSpec()
    sampling: SamplingSpec = SamplingSpec()
    batch_samples: int = Field(128, ge=1, description="the trainer's batch, to pace against")
    async_level: int = Field(DEFAULT_ASYNC_LEVEL, ge=0)
    prompts_per_file: int = Field(8, ge=1)
    address: str = Field("0x" + "00" * 19 + "01", pattern=r"^0x[0-9a-fA-F]{40}$")
    pool_seed: str = Field("00" * 32, pattern=r"^[0-9a-fA-F]{64}$", description="32-byte pool seed, hex")
    max_files: int = Field(0, ge=0, description="stop after this many files (0 = until the trainer is done)")
    poll_interval_s: float = Field(0.01, gt=0)
    threads: int = Field(1, ge=1)
    inference: Literal["float", "exact"] = Field("float", description="float weights, or each policy's integer form")

    @property
    def files_per_step(self) -> int:
        return max(1, self.batch_samples // (self.prompts_per_file * self.sampling.group_size))


def may_generate(
    config: LocalWorkerConfig, unconsumed: int, trainer_step: int, waiting: bool, policy_step: int,
    observed_files_per_step: float = 1.0,
) -> bool:
    """The pacing rule above: whether one more file now stays within async_level."""
    if config.async_level > 0:
        return unconsumed < config.async_level * max(config.files_per_step, observed_files_per_step)
    return unconsumed == 0 and waiting and policy_step == trainer_step


def run_worker(config: LocalWorkerConfig) -> int:
    """The worker loop; returns the number of files written."""
    torch.set_num_threads(config.threads)
    rollouts = config.run_dir / "rollouts"
    policies = config.run_dir / "policy"
    rollouts.mkdir(parents=True, exist_ok=True)
    task = build_task(config.task)
    dataset_size = assignment_space(task)
    tokenizer = None
    pool_seed = bytes.fromhex(config.pool_seed)
    model: PreTrainedModel | None = None
    backend: InferenceBackend | None = None
    model_step, written, exact = -1, 0, config.inference == "exact"
    while not (config.run_dir / DONE_MARKER).exists() and not (config.max_files and written >= config.max_files):
        pointer = latest_policy(policies)
        progress = read_progress(rollouts)
        if pointer is None or progress is None:
            time.sleep(config.poll_interval_s)
            continue
        unconsumed = sum(1 for p in rollouts.glob("*.parquet") if not p.name.startswith(".")) - progress.consumed
        if not may_generate(config, unconsumed, progress.step, progress.waiting, pointer.step, progress.files_per_step):
            time.sleep(config.poll_interval_s)
            continue
        if pointer.step != model_step:
            if model is None:
                model = load_local_policy(policies, pointer.step)
                backend = None if exact else TorchBackend(model)
            else:
                load_policy_weights(policies, pointer.step, model)
            if tokenizer is None:
                tokenizer = AutoTokenizer.from_pretrained(policies / f"step_{pointer.step:06d}")
            if exact:
                backend = exact_backend(model, tokenizer)
            model_step = pointer.step
        nonce = written
        indices = assign_prompts(pool_seed, config.address, nonce, dataset_size, config.prompts_per_file)
        batch = make_rollouts(backend, tokenizer, task, config.task, indices, config.sampling,
                              local_binding(config.address, model_step, nonce), pointer.digest, pool_seed=pool_seed,
                              prove=not exact)
        name = f"{model_step:06d}-{config.address[2:10].lower()}-{nonce:06d}.parquet"
        write_rollout_file(rollouts / name, batch)
        written += 1
    return written


@one_line_errors(failures=(TaskError, PolicyStoreError, InferenceError))
def main(argv: list[str] | None = None) -> int:
    """CLI entry: `--config run.toml` plus overrides; one line on error, non-zero exit (cli.errors.EXIT_CODES)."""
    args = list(sys.argv[1:] if argv is None else argv)
    toml = pop_option(args, "--config")
    config = load_settings(LocalWorkerConfig, toml, args)
    written = run_worker(config)
    print(f"worker {config.address}: wrote {written} rollout files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
