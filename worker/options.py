"""What `worker start`'s command line (worker/cli.py) and its daemon (worker/daemon.py) share, light enough for the
command to check its flags before web3 and torch load: the in-flight default, the compute flags' check."""

from __future__ import annotations

import argparse

from cli.errors import UsageError
from inference.device import Compute, ComputeChoiceError, choose_compute

DEFAULT_MAX_PENDING = 2
"""Submissions in flight before a first verdict. A worker makes at most max_pending files per verdict latency
(~1 s on the devnet, where 2 in flight halved bench.protocol's file rate against 8) and a broken one is slashed
for at most this many files before it sees the first challenge. Not more by default: the gate counts first
verdicts only, not the audits a court pool also needs, and in the demo (three workers, every file checked by both
honest validators at q = 1) 8 in flight grew the validators' backlog past the 30 s dispute window, so an
attest-all acceptance of a withheld file became final undisputed. Raise it where the validators keep pace."""


def compute_of(args: argparse.Namespace) -> Compute:
    """The engine, device and dtype of `worker start`'s flags, checked before anything starts (exit code 2)."""
    try:
        return choose_compute(args.device, args.dtype, args.backend)
    except ComputeChoiceError as exc:
        raise UsageError(str(exc)) from None
DEFAULT_RUN_LEAVES = 32
"""Leaves a worker in a pool that settles in batches signs and posts at once (fewer when it has no more to make now, or
its epoch ends): a claim's fixed part is shared by its run's leaves (bench.gas: 4,880 gas a file at runs of 32)."""
