"""`trainer local`'s run, once its options are checked (trainer/local_cli.py): the policy (a checkpoint folder or the
in-code tiny one), the local policy store, and the GRPO loop on `<run_dir>/rollouts` until max_steps."""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from transformers.utils import logging as hf_logging

from inference.local_store import DONE_MARKER, LocalPolicyStore
from inference.policy import load_policy
from inference.tiny import build_char_tokenizer, build_tiny_llama
from protocol.pool import versions_to_keep
from trainer.checkpoint import TrainerStateError
from trainer.config import TrainerConfig
from trainer.distributed import Distributed, launched_by_torchrun, quiet_followers
from trainer.loop import Trainer, TrainerStarved
from trainer.parallel import SingleProcess
from trainer.work_source import LocalDirectorySource


def run_local(config: TrainerConfig, init: str | None) -> int:
    """Train as `config` says, from `init` (a Hugging Face folder) or the tiny policy; 0 when max_steps is reached."""
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
