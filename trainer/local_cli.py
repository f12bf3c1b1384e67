"""`trainer local --config run.toml [--init-policy DIR] [--nproc N] [--key.sub value …]`.

Trains on rollout files that local workers write to `<run_dir>/rollouts`, publishes each
policy to `<run_dir>/policy` (more publishers, e.g. the IPFS checkpoint path, plug into
`Trainer(publishers=[...])`), checkpoints to `<run_dir>/checkpoints` (a restart resumes
there) and writes `<run_dir>/trainer.done` when max_steps is reached. With `--nproc N` (N > 1) it
runs as N ranks of one data-parallel trainer (FSDP2 by default, `--parallel ddp`; see
trainer/distributed.py); rank 0 publishes and writes the metrics.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cli.console import signals_held
from cli.errors import one_line_errors
from cli.options import load_settings, pop_option
from trainer.config import TrainerConfig
from trainer.options import pop_nproc


@one_line_errors  # Ctrl-C while torch imports: one line, exit 130
def main(argv: list[str] | None = None) -> int:
    """CLI entry: one line on error, non-zero exit (cli.errors.EXIT_CODES). The options and the config are checked
    before torch loads, so bad input answers at once."""
    args = list(sys.argv[1:] if argv is None else argv)
    nproc = pop_nproc(args)
    toml = pop_option(args, "--config")
    init = pop_option(args, "--init-policy")
    config = load_settings(TrainerConfig, toml, args)  # validated once here, before any rank starts
    with signals_held():
        from trainer.checkpoint import TrainerStateError
        from trainer.distributed import launch, refuse_a_one_process_checkpoint
        from trainer.local_run import run_local
        from trainer.loop import TrainerStarved
    if nproc is not None and nproc > 1:
        refuse_a_one_process_checkpoint(Path(config.run_dir) / "checkpoints")
        return launch(nproc, ["trainer.main", "local", *_options(toml, init), *args])
    return one_line_errors(failures=(TrainerStarved, TrainerStateError))(run_local)(config, init)


def _options(toml: str | None, init: str | None) -> list[str]:
    return [*(["--config", toml] if toml else []), *(["--init-policy", init] if init else [])]


if __name__ == "__main__":
    sys.exit(main())
