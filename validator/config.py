"""A validator daemon's configuration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from protocol.pool import VALIDATOR_FETCH_TIMEOUT_S, VALIDATOR_VERDICT_MARGIN_S


@dataclass
class DaemonConfig:
    """How one validator daemon judges one pool (`validator start`'s options)."""

    pool_id: int
    state_dir: Path
    kubo_api: str
    fetch_timeout_s: float = VALIDATOR_FETCH_TIMEOUT_S
    fetch_attempts: int = 3
    """Fetches of a file before it is challenged UNAVAILABLE (fewer if the window is closing)."""
    retry_backoff_s: float = 10.0
    """Delay before the second attempt of anything; doubles with each further attempt."""
    check_timeout_s: float = 300.0
    max_checker_failures: int = 3
    """Crashes or timeouts of the checker on one file before it is challenged UNCHECKABLE."""
    verdict_margin_s: float = VALIDATOR_VERDICT_MARGIN_S
    """A fetch retry that would end later than this before the window closes is not waited for."""
    processes: int = 1
    max_in_flight: int = 8
    max_checks_per_poll: int = 16
    """Files checked in one poll at most; the rest wait for the next (in the retry book, no attempt counted), so a
    backlog cannot hold up the court duties a poll ends with (a vote's commit period is 20 s in the demo: with
    every file of a poll checked first, an honest validator under load missed commits and paid the penalty)."""
    confirmations: int = 0
    poll_interval_s: float = 0.5
    """The least time between two polls for retries that are due while the head stays (a new head polls at once)."""
    head_every_s: float = 2.0
    """The longest an idle daemon waits between two looks at the head (`eth_blockNumber`): the chain's block time.
    It looks 0.1 s after each poll, the wait doubling up to this while the head stays (issue 47)."""
    audit_rate: float = 0.1
    """Court pools: the fraction of other validators' verdicts re-checked (and disputed if wrong)."""
    device: str = "cpu"
    """Where the checker processes run the float32 reference prefill (`validator start --device`: cpu, cuda,
    cuda:N); validator.checks.checker_factory hands it to each checker process."""
