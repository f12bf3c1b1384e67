"""`python -m trainer.cli --config run.toml [--init-policy DIR] [--key.sub value …]`.

Trains on rollout files that local workers write to `<run_dir>/rollouts`, publishes each
policy to `<run_dir>/policy` (more publishers, e.g. the IPFS checkpoint path, plug into
`Trainer(publishers=[...])`), checkpoints to `<run_dir>/checkpoints` (a restart resumes
there) and writes `<run_dir>/trainer.done` when max_steps is reached.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import torch
from pydantic import ValidationError
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from inference.tiny import build_char_tokenizer, build_tiny_llama
from ledger_client.local_store import DONE_MARKER, LocalPolicyStore
from ledger_client.settings import describe_error, load_settings
from trainer.checkpoint import CheckpointError
from trainer.config import TrainerConfig
from trainer.loop import Trainer, TrainerStarved
from trainer.work_source import LocalDirectorySource

def _pop_option(args: list[str], name: str) -> str | None:
    if name not in args:
        return None
    at = args.index(name)
    if at + 1 >= len(args):
        raise ValueError(f"{name} needs a value")
    value = args[at + 1]
    del args[at : at + 2]
    return value


def main(argv: list[str] | None = None) -> int:
    """CLI entry: one line on error, non-zero exit."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        toml = _pop_option(args, "--config")
        init = _pop_option(args, "--init-policy")
        config = load_settings(TrainerConfig, toml, args)
        torch.set_num_threads(1)
        hf_logging.disable_progress_bar()
        if init:
            model = AutoModelForCausalLM.from_pretrained(Path(init))
            tokenizer = AutoTokenizer.from_pretrained(Path(init))
        else:
            tokenizer = build_char_tokenizer()
            spec = config.model
            model = build_tiny_llama(len(tokenizer), seed=spec.init_seed, hidden=spec.hidden, layers=spec.layers, heads=spec.heads)
        store = LocalPolicyStore(config.run_dir / "policy", model.config, tokenizer, keep=config.async_level + 2)
        # the KL term (loss.kl_coef > 0) pulls towards the initial policy, frozen
        reference = copy.deepcopy(model).eval() if config.loss.kl_coef > 0 else None
        trainer = Trainer(
            config, model, LocalDirectorySource(config.run_dir / "rollouts"), publishers=[store], reference=reference
        )
        trainer.run(on_step=lambda m: print(
            f"step {m.step}  batch reward {m.batch_reward:.3f}  entropy {m.entropy:.3f}  staleness {m.staleness_mean:.2f}  idle {m.idle_s:.2f}s",
            flush=True,
        ))
        (config.run_dir / DONE_MARKER).touch()
    except (ValueError, ValidationError, FileNotFoundError, OSError, CheckpointError, TrainerStarved) as exc:
        print(f"error: {describe_error(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
