"""`trainer local --config run.toml [--init-policy DIR] [--nproc N] [--key.sub value …]`.

Trains on rollout files that local workers write to `<run_dir>/rollouts`, publishes each
policy to `<run_dir>/policy` (more publishers, e.g. the IPFS checkpoint path, plug into
`Trainer(publishers=[...])`), checkpoints to `<run_dir>/checkpoints` (a restart resumes
there) and writes `<run_dir>/trainer.done` when max_steps is reached. With `--nproc N` (N > 1) it
runs as N ranks of one data-parallel trainer (FSDP2 by default, `--parallel ddp`; see
trainer/distributed.py); rank 0 publishes and writes the metrics.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import torch
from transformers.utils import logging as hf_logging

from cli.errors import one_line_errors
from cli.options import load_settings, pop_option
from inference.local_store import DONE_MARKER, LocalPolicyStore
from inference.policy import load_policy
from inference.tiny import build_char_tokenizer, build_tiny_llama
from protocol.pool import versions_to_keep
from trainer.checkpoint import TrainerStateError
from trainer.config import TrainerConfig
from trainer.distributed import Distributed, launch, launched_by_torchrun, pop_nproc, quiet_followers
from trainer.loop import Trainer, TrainerStarved
from trainer.parallel import SingleProcess
from trainer.work_source import LocalDirectorySource


@one_line_errors(failures=(TrainerStarved, TrainerStateError))
def main(argv: list[str] | None = None) -> int:
    """CLI entry: one line on error, non-zero exit (cli.errors.EXIT_CODES)."""
    args = list(sys.argv[1:] if argv is None else argv)
    nproc = pop_nproc(args)
    toml = pop_option(args, "--config")
    init = pop_option(args, "--init-policy")
    config = load_settings(TrainerConfig, toml, args)  # validated once here, before any rank starts
    if nproc is not None and nproc > 1:
        return launch(nproc, ["trainer.main", "local", *_options(toml, init), *args])
    parallel = Distributed(config.parallel) if launched_by_torchrun() else SingleProcess()
    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()
    if init:
        # float32 master weights whatever the checkpoint's dtype: an lr-3e-7 AdamW step is below bf16's
        # resolution (8 bits of mantissa) and would be lost
        model, tokenizer = load_policy(Path(init))
    else:
        tokenizer = build_char_tokenizer()
        spec = config.model
        model = build_tiny_llama(len(tokenizer), seed=spec.init_seed, hidden=spec.hidden, layers=spec.layers, heads=spec.heads)
    store = LocalPolicyStore(config.run_dir / "policy", model.config, tokenizer,
                             # one more than the pool rule: a worker may be loading the version just superseded
                             keep=versions_to_keep(config.async_level) + 1)
    # the KL term (loss.kl_coef > 0) pulls towards the initial policy, frozen
    reference = copy.deepcopy(model).eval() if config.loss.kl_coef > 0 else None
    trainer = Trainer(config, model, LocalDirectorySource(config.run_dir / "rollouts"), publishers=[store],
                      reference=reference, parallel=parallel)
    with quiet_followers(parallel.is_main, failures=(TrainerStarved, TrainerStateError)):
        trainer.run(on_step=lambda m: parallel.is_main and print(
            f"step {m.step}  batch reward {m.batch_reward:.3f}  entropy {m.entropy:.3f}  staleness {m.staleness_mean:.2f}  idle {m.idle_s:.2f}s",
            flush=True,
        ))
    if parallel.is_main:
        (config.run_dir / DONE_MARKER).touch()
    return 0


def _options(toml: str | None, init: str | None) -> list[str]:
    return [*(["--config", toml] if toml else []), *(["--init-policy", init] if init else [])]

if __name__ == "__main__":
    sys.exit(main())
