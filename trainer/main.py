"""`trainer init | start | local` — the trainer's command.

`init` builds, warm-starts and publishes the initial policy and the run spec of a new pool
(trainer/bootstrap.py); `start` trains on the work a pool's ledger accepts and publishes checkpoints on IPFS and
on-chain (trainer/start.py); `local` trains on rollout files of local worker processes
(trainer/local_cli.py, used by examples/cpu_run.py and bench.async).

examples:
  trainer init --run-spec examples/run.toml               # prints the [pool] lines (task, base_checkpoint); devnet: @init
  trainer start --pool 1 --devnet-trainer --set max_steps=20 --set batch_samples=32
  trainer local --config run.toml --nproc 2               # FSDP2 on rollout files in <run_dir>/rollouts
"""

from __future__ import annotations

import sys

from cli.console import signals_held
from cli.errors import EXIT_USAGE, UsageError, one_line_errors
from cli.options import Parser
from trainer.options import add_init_args, add_start_args, check_init_files, check_start_files


@one_line_errors  # Ctrl-C while torch imports: one line, exit 130
def _start(argv: list[str]) -> int:
    p = Parser(prog="trainer start", description=__doc__.splitlines()[0])
    add_start_args(p)
    args = p.parse_args(argv)  # before torch loads: --help and bad input answer at once
    check_start_files(args)
    with signals_held():  # Ctrl-C while they import: one line (cli.console)
        from trainer.checkpoint import TrainerStateError
        from trainer.distributed import launch
        from trainer.loop import TrainerStarved, UnpublishablePolicy
        from trainer.start import run_start

    @one_line_errors(failures=(TrainerStarved, TrainerStateError, UnpublishablePolicy))
    def start() -> int:
        args.device = _checked_device(args.device, args.nproc or 1)
        if args.nproc is not None and args.nproc > 1:
            return launch(args.nproc, ["trainer.main", "start", *_without_nproc(argv)])
        return run_start(args)

    return start()


def _checked_device(text: str, nproc: int) -> str:
    """`trainer start --device`, refused before anything starts: unknown or absent here, or, with --nproc > 1 on
    CUDA, not one GPU per rank."""
    import torch

    from inference.device import ComputeChoiceError, parse_device
    from trainer.distributed import launched_by_torchrun

    try:
        device = parse_device(text)
    except ComputeChoiceError as exc:
        raise UsageError(str(exc)) from None
    if device != "cpu" and (nproc > 1 or launched_by_torchrun()):
        if device != "cuda":
            raise UsageError(f"--device {device} with several ranks: each rank takes its own GPU (cuda:LOCAL_RANK); "
                             "pass --device cuda (CUDA_VISIBLE_DEVICES picks which GPUs)")
        if nproc > torch.cuda.device_count():
            raise UsageError(f"--nproc {nproc} on CUDA needs one GPU per rank; this machine has "
                             f"{torch.cuda.device_count()}")
    return device


def _without_nproc(argv: list[str]) -> list[str]:
    at = argv.index("--nproc") if "--nproc" in argv else None
    if at is None:  # --nproc=N
        return [a for a in argv if not a.startswith("--nproc=")]
    return argv[:at] + argv[at + 2:]


@one_line_errors
def _init(argv: list[str]) -> int:
    p = Parser(prog="trainer init", description="Initial policy and run spec of a new pool.")
    add_init_args(p)
    args = p.parse_args(argv)  # before torch loads: --help and bad input answer at once
    check_init_files(args)
    with signals_held():
        from trainer.bootstrap import run_init

    return run_init(args)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args else EXIT_USAGE
    command, rest = args[0], args[1:]
    if command == "init":
        return _init(rest)
    if command == "start":
        return _start(rest)
    if command == "local":
        from trainer.local_cli import main as local_main

        return local_main(rest)
    print(f"error: unknown command {command!r} (expected init, start or local)", file=sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    raise SystemExit(main())
