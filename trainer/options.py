"""The trainer's command-line options (`trainer init`, `trainer start`) and the checks of their files, with the
standard library and light project modules only: `--help` and bad input answer before torch loads."""

from __future__ import annotations

import argparse
from pathlib import Path

from cli.devnet import DEVNET_DIR_HELP, default_devnet_dir
from cli.errors import UsageError
from cli.options import COUNT, POOL_ID, PORT, POSITIVE, add_chain_args, add_log_args, pop_option, real, require_file

TINY_HIDDEN, TINY_LAYERS, TINY_HEADS = 128, 4, 4
"""The in-code tiny policy's default shape (trainer.config.ModelSpec)."""


def add_init_args(p: argparse.ArgumentParser) -> None:
    """`trainer init`'s options."""
    p.add_argument("--run-spec", type=Path, required=True, help="run spec TOML (task, sampling, verification)")
    p.add_argument("--kubo-api", help="Kubo RPC API (default: the devnet's)")
    p.add_argument("--devnet-dir", type=Path, default=default_devnet_dir(), help=DEVNET_DIR_HELP)
    p.add_argument("--checkpoint", type=Path, help="start from this Hugging Face model folder (default: the tiny "
                   "in-code model built from --hidden/--layers/--heads)")
    p.add_argument("--hidden", type=POSITIVE, default=TINY_HIDDEN, help="tiny model: hidden size (default %(default)s)")
    p.add_argument("--layers", type=POSITIVE, default=TINY_LAYERS, help="tiny model: layers (default %(default)s)")
    p.add_argument("--heads", type=POSITIVE, default=TINY_HEADS, help="tiny model: attention heads (default %(default)s)")
    p.add_argument("--warm-steps", type=COUNT, default=25, help="supervised warm-up steps on the task's answer format "
                   "(default %(default)s); a policy that gets no prompt partly right gives the trainer nothing to learn from")
    p.add_argument("--warm-lr", type=real(0.0, above=True), default=1e-3, help="warm-up learning rate (default %(default)s)")
    p.add_argument("--seed", type=COUNT, default=0, help="warm-up and sampling seed: the same seed, the same digests")
    p.add_argument("--difficulty-candidates", type=COUNT, default=0,
                   help="offline difficulty filter over this many train problems (0: no filter)")
    p.add_argument("--difficulty-attempts", type=POSITIVE, default=8, help="samples per problem for its pass rate")
    p.add_argument("--difficulty-band", type=real(0.0, most=1.0), nargs=2, default=(0.1, 0.8), metavar=("LOW", "HIGH"),
                   help="keep problems whose pass rate lies in [LOW, HIGH]")
    p.add_argument("--json", action="store_true", help="print the digests as one JSON line instead of a [pool] section "
                   "(and no progress lines)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr (building, warm start, publishing)")


def add_start_args(p: argparse.ArgumentParser) -> None:
    """`trainer start`'s options."""
    p.add_argument("--pool", type=POOL_ID, required=True, help="pool id (this key must be its trainer)")
    p.add_argument("--config", type=Path, help="trainer TOML (loss, optimizer, batch size, run_dir, max_steps)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set max_steps=20 --set optim.lr=1e-3")
    p.add_argument("--kubo-api", help="Kubo RPC API (default: the devnet's)")
    p.add_argument("--eval-every", type=COUNT, default=0, help="greedy held-out accuracy every N steps (0: never)")
    p.add_argument("--eval-problems", type=POSITIVE, default=100, help="held-out problems per evaluation (default 100)")
    add_chain_args(p)
    p.add_argument("--wait-final", action=argparse.BooleanOptionalAction, default=True,
                   help="consume a submission only once its verdict can no longer be overturned (default, on every "
                        "chain). --no-wait-final consumes at the first accepting verdict: faster, but the trainer then "
                        "learns from work a dispute may still overturn (counted as consumed_overturned, never undone)")
    p.add_argument("--devnet-trainer", action="store_true", help="use the devnet's trainer key")
    add_log_args(p)
    p.add_argument("--policy-verification", type=Path, metavar="FILE", help=(
        "attach these tolerances to every policy published (a [verification] table as `validator calibrate --out` "
        "writes, measured on a recent policy): validators judge the policy's files by the looser of them and the run "
        "spec's. Re-read before each publish, so a recalibration takes effect without a restart"))
    p.add_argument("--json", action="store_true", help="one JSON object per step on stdout")
    p.add_argument("--metrics-port", type=PORT, help="serve Prometheus /metrics on 127.0.0.1:PORT (the main rank)")
    p.add_argument("--nproc", type=POSITIVE, help="train as N data-parallel ranks on this machine (FSDP2; --set parallel=ddp)")
    p.add_argument("--device", default="cpu",
                   help="where the policy trains: cpu (default), cuda or cuda:N; with --nproc N on CUDA: --device cuda, "
                        "one GPU per rank (cuda:0 … cuda:N-1), NCCL between them")


def check_init_files(args: argparse.Namespace) -> None:
    """`trainer init`'s files, before torch loads: the run spec exists, --checkpoint is a folder."""
    require_file(args.run_spec, "run spec")
    if args.checkpoint is not None and not args.checkpoint.is_dir():
        raise UsageError(f"--checkpoint {args.checkpoint}: no such folder (a Hugging Face model folder)")


def check_start_files(args: argparse.Namespace) -> None:
    """`trainer start`'s files, before torch loads: --config and --policy-verification exist."""
    if args.config is not None:
        require_file(args.config, "config file")
    if args.policy_verification is not None:
        require_file(args.policy_verification, "policy verification file")


def pop_nproc(args: list[str]) -> int | None:
    """Remove `--nproc N` from `args`; None when absent, N >= 1 otherwise."""
    value = pop_option(args, "--nproc")
    if value is None:
        return None
    if not value.isdigit() or int(value) < 1:
        raise UsageError(f"--nproc must be a positive integer, got {value!r}")
    return int(value)
