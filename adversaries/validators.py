"""Dishonest validators of court pools (validator.court.Conduct): what the end-to-end test and the
demo run against honest ones, each of which the court makes lose stake (docs/protocol.md, "Bonded
validators and disputes"):

  attest-all      attests every submission without checking it → disputed, overturned, slashed
                  `wrongVerdictSlash`; on committees it votes "valid" whatever the work; it concurs with
                  every verdict it audits, unchecked
  challenge-all   challenges every submission → the same, for honest work; on committees votes "invalid"
  silent          registers and never answers → `silencePenalty` whenever it is assigned, and the
                  committee penalty whenever it is drawn
  random-vote     judges honestly but votes at random → the committee penalty whenever it votes with
                  the minority (half the time), for less than that in shares when it votes with the majority

Run one as a daemon: `python -m adversaries.validators --conduct attest-all start --pool N …`
(everything after the conduct is `validator start`'s command line).
"""

from __future__ import annotations

import argparse
import random
import sys

from validator.cli import main as validator_main
from validator.court import Conduct


class AttestEverything(Conduct):
    name = "attest-all"
    checks = False  # a rubber stamp: why spend a check on an answer it gives anyway

    def verdict(self, ok: bool) -> bool:
        return True

    def vote(self, ok: bool) -> bool:
        return True


class ChallengeEverything(Conduct):
    name = "challenge-all"

    def verdict(self, ok: bool) -> bool:
        return False

    def vote(self, ok: bool) -> bool:
        return False


class Silent(Conduct):
    name = "silent"
    judges = False
    votes = False


class RandomVoter(Conduct):
    name = "random-vote"

    def __init__(self, seed: int | None = None):
        self._rng = random.Random(seed)

    def vote(self, ok: bool) -> bool:
        return self._rng.random() < 0.5


CONDUCTS = {c.name: c for c in (Conduct, AttestEverything, ChallengeEverything, Silent, RandomVoter)}
"""Conducts by name (for the demo's command line)."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="adversaries.validators",
                                description="A dishonest validator daemon of a court pool (for demos and tests).")
    p.add_argument("--conduct", required=True, choices=sorted(n for n in CONDUCTS if n != Conduct.name))
    args, rest = p.parse_known_args(sys.argv[1:] if argv is None else argv)
    return validator_main(rest, conduct=CONDUCTS[args.conduct]())


if __name__ == "__main__":
    raise SystemExit(main())
