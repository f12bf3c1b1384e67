"""`worker start`: the contributor daemon.

From a key and a pool id: bond and allocate stake to the pool (its minimum) and join; read the
pool's run spec (its taskRef) from IPFS; follow the pool's newest checkpoint, fetch and verify its
shards, load the policy; for each step generate up to `submissions_per_step` rollout files, each
bound to (chain, pool, worker, step, nonce) with the chain's next nonce and answering the prompts
that nonce assigns (with TOPLOC proofs and seeded sampling); before each submission top the pool
allocation up to what it requires (again after a slash); upload each file to Kubo and `submitWork`
its digest; claim rewards once unlocked. A policy the producer cannot use (an exact pool's checkpoint that exact mode
cannot run: protocol.runspec.UnrunnablePolicy) is refused in one log line: nothing is made on its step, and the worker
waits for a usable policy. Every submission goes through the crash-safe journal
(worker/journal.py), so a kill -9 loses nothing, submits nothing twice and skips no nonce.
SIGTERM finishes the current submission if its file is already uploaded, otherwise abandons it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.live import Live
from rich.table import Table

from cli.console import stop_on_signals
from cli.daemon_lock import DaemonLock
from cli.devnet import load_devnet_info
from cli.errors import UsageError
from cli.options import configure_logging
from cli.output import tokens
from inference.policy import PolicyLoader
from ledger_client.chain import errors
from ledger_client.chain.batches import batches_of
from ledger_client.chain.bindings import MemberView
from ledger_client.chain.errors import ContractRevert, LedgerError
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import (
    chain_time,
    court_of,
    eligible_judge,
    get_work,
    next_binding,
    pool_created_in,
    pool_state,
    rollout_digest_of,
)
from ledger_client.chain.watch import ChainWatch
from ledger_client.ipfs.checkpoints import FetchedCheckpoint, PinRetention, fetch_checkpoint
from ledger_client.ipfs.content import ContentError, fetch_run_spec, get_object, put_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.demand import DemandNote
from protocol.digest import WorkId, cid_to_digest, hex_text
from protocol.pool import CaseState, WorkStatus, versions_to_keep
from protocol.phases import phase
from protocol.rollouts import decode_rollouts
from protocol.runspec import RunSpec, UnrunnablePolicy, usable_task
from protocol.submission import SubmissionBinding
from worker.account import challenges_of, claim_all, claim_works, open_ledger, stake_for_next_submission
from worker.batched import BatchedWork
from worker.forced import ForcedErrorChain, resubmittable, with_owed_error
from worker.options import DEFAULT_MAX_PENDING, DEFAULT_RUN_LEAVES, compute_of
from worker.journal import Journal, journal_name
from worker.metrics import WorkerMetrics
from worker.pacing import PACE_POLL_S, Pacer
from worker.policy import Policy, RolloutProducer
from worker.produce import Producer, engine_problem, torch_backend_of

log = logging.getLogger("proofswarm.worker")


LoadPolicy = Callable[[Path], tuple[object, object]]
PREFETCH_POLL_S = 0.25
"""How often the prefetch thread looks at the process's `ChainWatch` for a new checkpoint (the watch reads the chain at
most once per `IDLE_LOOK_S` for it)."""
IDLE_LOOK_S = 2.0
"""How often a worker reads the pool's state (for a new checkpoint, a closed pool): one request per 2 s block for the
main loop and the prefetch thread together, busy or idle (`getPool` every 0.25 s from the prefetch thread, and the main
loop's every poll interval, made an idle worker send ~6 requests a second: 6,000 for a pool of 1,000; issue 46)."""
QUIET_VERDICT_LOOK_S = 30.0
"""The longest wait between two looks at the open submissions' verdicts of a worker whose files for the step are made
(`IDLE_LOOK_S` while it has files to send: its --max-pending gate waits on them)."""
CHAIN_TIME_CHECK_S = 60.0
"""While no accepted reward can be due by the chain's clock as last read plus the wall time since, the worker reads
that clock again only this often (a devnet's clock can jump ahead: `devnet advance`); it asked every claim interval."""


@dataclass
class WorkerOptions:
    pool_id: int
    kubo_api: str
    work_dir: Path
    submissions_per_step: int = 1
    poll_interval_s: float = 0.5
    fetch_timeout_s: float = 120.0
    max_submissions: int | None = None
    claim_interval_s: float = 5.0
    max_pending: int = DEFAULT_MAX_PENDING
    """Submit no more while this many of our submissions await a verdict (keeps pace with the validators).
    In a court pool a first verdict counts: finality comes a dispute window later, and waiting for it would
    pace the worker by the window instead of by the validators."""
    max_restakes: int | None = None
    """Slashes after which the daemon tops its allocation up again; the next one stops it (RestakeCapReached).
    None (the library's default; `worker start` caps at 3): no cap, as the demo's adversary and the tests want."""
    explorer: str | None = None
    """The pool explorer's URL: each challenge links to its page there."""
    pace: bool = True
    """Pace on the trainer's demand note (worker/pacing.py); False: generate as fast as possible."""
    run_leaves: int = DEFAULT_RUN_LEAVES
    """In a pool that settles in batches: leaves signed and posted at once (fewer when the worker has no more to make
    now)."""


@dataclass
class WorkerStats:
    step: int = -1
    submitted: int = 0
    claimed: int = 0
    last_event: str = "starting"
    verdicts: dict[str, int] = field(default_factory=dict)
    challenges: list[dict] = field(default_factory=list)
    """Each challenge of our work seen while running: reason, slash, links to its evidence (worker.account)."""
    restaked: int = 0
    """Stake added back to the allocation after slashes."""
    forced_errors: int = 0
    """Files this worker's chain said owed a forced error, planted as the protocol says (docs/protocol.md R9.26)."""


class RestakeCapReached(LedgerError):
    """The daemon was slashed more often than --max-restakes lets it re-stake (exit 1, with the last reason)."""


class WorkerDaemon:
    batched: BatchedWork | None = None
    """The pool's batched path when its files settle in WorkBatches (`prepare`; worker/batched.py)."""

    def __init__(self, ledger: Ledger, options: WorkerOptions, producer: RolloutProducer, loader: LoadPolicy,
                 upload: Callable[[KuboClient, bytes], object] = put_object, metrics: WorkerMetrics | None = None):
        self.ledger = ledger
        self.upload = upload
        self.opt = options
        self.produce = producer
        self.load = loader
        self.kubo = KuboClient(options.kubo_api)
        d = ledger.deployment
        journal = options.work_dir / journal_name(d.chain_id, d.compute_pool, pool_created_in(ledger, options.pool_id),
                                                  options.pool_id)
        self._journal_path = journal
        lock = journal.with_suffix(".lock")
        self.lock = DaemonLock.hold(lock, f"{options.work_dir} is in use by another worker daemon of pool "
                                          f"{options.pool_id} (it holds {lock}): one daemon a pool per work folder")
        self.journal = Journal(journal)
        self.stats = WorkerStats()
        self.metrics = metrics or WorkerMetrics()
        self.policy: Policy | None = None
        self.spec: RunSpec | None = None
        self._last_claim = 0.0
        self._chain_time: tuple[float, int] | None = None
        """(monotonic clock, the chain's clock) when `maybe_claim` last read the latest block's timestamp."""
        self._verdict_looked_at = float("-inf")
        self._verdict_gap = options.poll_interval_s
        self._last_look = (0, 0)
        """When the chain was last asked about our open submissions, the wait before the next look (at most the caller's
        longest), and that look's (journal's open submissions, those of them awaiting a verdict) (`_verdicts`)."""
        self._awaiting_verdicts = False  # the last step_once stopped at --max-pending
        self._awaiting_demand = False  # the last step_once stopped because the trainer holds enough files
        self.pacer = Pacer(async_level=1)  # prepare() sets the pool's async level
        self._prefetched: tuple[int, bytes, FetchedCheckpoint] | None = None
        """(step, digest, local copy) of the newest checkpoint, fetched ahead by `run`'s prefetch thread."""
        self.watch = ChainWatch(ledger.w3, lambda: pool_state(ledger, options.pool_id), IDLE_LOOK_S)
        """The pool's state, read once per `IDLE_LOOK_S` for the main loop and the prefetch thread together."""
        self._quiet_step: int | None = None
        """The latest step when this step's submissions were all made: until the pool's latest step moves on,
        `step_once` has nothing to do and reads nothing more than the pool's state."""
        self._prefetch_stop = threading.Event()
        self.stopping = threading.Event()
        """Set when the daemon is stopped (`run` takes its caller's event); before `run`, Ctrl-C raises instead."""
        self._fetch_lock = threading.Lock()
        self._court = court_of(ledger, options.pool_id)
        self._court_can_judge = self._court is None
        """Whether a court pool has had an eligible validator: asked before each file until it has."""
        self._judge_wait_logged = False
        self.chain: ForcedErrorChain | None = None
        """The worker's committed hash chain when the pool has forced errors (`prepare`): which files owe one."""
        self._chain_ticked = 0.0
        self._batched_looked = float("-inf")
        self._refused: tuple[int, bytes] | None = None
        """(step, manifest digest) of the policy the producer could not use (UnrunnablePolicy): nothing is generated
        on it, and the worker waits for its nonce's step to go stale to skip it (`step_once`)."""

    # ------------------------------------------------------------------ set-up

    def prepare(self) -> None:
        """Read the run spec and build its task (refusing a task this machine cannot run), allocate what the next
        submissions need (the pool minimum at least; `stake_for_next_submission`'s ALLOCATE_AHEAD files when the account
        holds enough: a top-up's three transactions are made before the first file, not among them), join, finish what a
        crash left."""
        pool = pool_state(self.ledger, self.opt.pool_id)
        if not pool.active:
            raise UsageError(f"pool {self.opt.pool_id} is closed")
        self.pool = pool
        self.pacer.async_level = max(1, pool.async_level)
        self.spec = fetch_run_spec(self.kubo, pool.task_ref)
        usable_task(self.spec)  # TaskUnavailable before any stake moves: this machine cannot score the pool's rewards
        compute = getattr(self.produce, "compute", None)
        problem = compute and engine_problem(self.spec, compute)
        if problem:  # before any stake moves too: this engine cannot generate the pool's completions
            raise UsageError(f"pool {self.opt.pool_id}: {problem}")
        stake_for_next_submission(self.ledger, self.opt.pool_id, pool.min_stake, pool.slash_amount)
        if not self.ledger.pool.is_member(self.opt.pool_id, self.ledger.address):
            self.ledger.pool.join_pool(self.opt.pool_id)
        self.chain = ForcedErrorChain.of(self.ledger, self.opt.pool_id)
        self.tick_chain(force=True)
        wb = batches_of(self.ledger, self.opt.pool_id)
        if wb is not None:
            self.batched = BatchedWork(self.ledger, self.opt.pool_id, wb,
                                       self._journal_path.with_name(f"batches-{self._journal_path.name}"), self.kubo,
                                       self.upload, self.opt.work_dir / "rollouts", self.opt.run_leaves)
            self.batched.lock_bond()
        self.recover()

    def tick_chain(self, force: bool = False) -> None:
        """In a pool with forced errors: commit the worker's chain (locking the pool's worker bond) when none is live,
        and reveal each epoch's link inside its window (a withheld link costs S + R a file of its epoch: R9.27). At
        most once a poll interval; the chain's state is on-chain, so a restart goes on where it was."""
        if self.chain is None or not (force or time.monotonic() - self._chain_ticked >= self.opt.poll_interval_s):
            return
        self._chain_ticked = time.monotonic()
        self.chain.tick(self.watch.chain_time())

    def member(self) -> MemberView:
        """Our record in this pool: next nonce and the step pinned for it."""
        return self.ledger.pool.get_member(self.opt.pool_id, self.ledger.address)

    def _member_now(self) -> MemberView:
        """Our record in this pool; if its next nonce is one the journal holds as submitted, a reorg dropped that
        submission: every open submission is read at once (pending_verdicts: recover() resubmits what vanished), not
        left to the verdict looks, which stop at the oldest one still awaiting its verdict."""
        member = self.member()
        if any(e["nonce"] >= member.next_nonce for e in self.journal.open_submissions()):
            self.pending_verdicts()
            member = self.member()
        return member

    def next_nonce(self) -> int:
        """The nonce the chain expects next from us in this pool (the journal never picks one)."""
        return self.member().next_nonce

    def recover(self) -> None:
        """Finish or drop journal entries left by a crash (or undone by a reorg), by the chain's next nonce:
        entries below it are on-chain, entries from it on are not, whatever stage the journal recorded."""
        next_nonce = self.next_nonce()
        for e in self.journal.entries():
            nonce, digest = e["nonce"], bytes.fromhex(e["digest"])
            if nonce < next_nonce and e["stage"] == "submitted":
                continue
            if nonce < next_nonce:  # the chain used this nonce: was it our file?
                if rollout_digest_of(self.ledger, bytes.fromhex(e["work_id"])) == digest:
                    self.journal.advance(nonce, "submitted")
                else:
                    log.warning("nonce %d was used by another submission; dropping its journal entry", nonce)
                    self.journal.drop(nonce)
                continue
            if nonce > next_nonce:  # cannot be submitted before the nonces below it
                self.journal.drop(nonce)
                continue
            data = Path(e["file"]).read_bytes()
            pinned = next_binding(self.ledger, self.opt.pool_id)
            if decode_rollouts(data).header.binding != pinned:
                # a reorg moved the block that pinned this nonce: the file's seeds are no longer the nonce's
                log.warning("nonce %d is now pinned by another block; dropping its file to make it again", nonce)
                self.journal.drop(nonce)
                continue
            owes = self._owes_as_made(e) if self.chain is not None else True
            if owes is None:  # stopped while waiting for the epoch: the entry stays for the next start
                return
            if not owes:
                log.warning("nonce %d's file was made for another forced-error epoch than the one it would land in now; "
                            "dropping it to make it again for this one", nonce)
                self.journal.drop(nonce)
                continue
            self.upload(self.kubo, data)
            self.journal.advance(nonce, "uploaded", final=None)
            try:
                self.ledger.pool.submit_work(self.opt.pool_id, e["step"], nonce, digest, e["n_samples"])
            except ContractRevert as exc:  # e.g. the step went stale while we were down: the nonce stays free
                log.warning("dropping recovered submission %s: %s", e["digest"], exc)
                self.journal.drop(nonce)
                continue
            self.journal.advance(nonce, "submitted")
            self.stats.submitted += 1
            next_nonce += 1

    def _owes_as_made(self, e: dict) -> bool | None:
        """Whether the journal's file `e`, made before a crash, carries what the epoch it would land in now owes: its
        duty is re-decided for that epoch (after waiting out the epoch's last seconds, as a first submission does;
        None: the daemon was stopped meanwhile)."""
        now = self.watch.chain_time()
        while wait := self.chain.wait_s(now):
            log.info("waiting %d s for the next forced-error epoch before resubmitting nonce %d", wait, e["nonce"])
            if self.stopping.wait(wait):
                return None
            now = max(now + wait, self.watch.chain_time())
        return resubmittable(self.chain, bytes.fromhex(e["work_id"]), bool(e.get("forced")), now)

    # ------------------------------------------------------------------ main loop

    def run(self, stop: threading.Event) -> None:
        self.stopping = stop
        prefetcher = threading.Thread(target=self._prefetch_policies, args=(stop,), name="prefetch", daemon=True)
        prefetcher.start()
        try:
            while not stop.is_set():
                if self.opt.max_submissions is not None and self.stats.submitted >= self.opt.max_submissions:
                    break
                did_work = self.step_once(stop, IDLE_LOOK_S)
                self.maybe_claim()
                self.tick_chain()
                if not did_work:
                    stop.wait(self.pause_s())
        finally:
            self._prefetch_stop.set()
            prefetcher.join(timeout=2.0)  # a fetch in progress is abandoned (a daemon thread); the next one resumes it

    def _prefetch_policies(self, stop: threading.Event) -> None:
        """Fetch (and verify) each new checkpoint of the pool while the main loop generates with the current one,
        so the file pinned to it needs only the load (fetching in line was ~12 % of a worker's time per file,
        bench.protocol). Not the load: a second model in memory is too much for a large one. Best effort: on any
        error the main loop fetches the step itself."""
        while not (stop.is_set() or self._prefetch_stop.is_set()):
            try:
                latest = self.watch.pool(IDLE_LOOK_S).latest_step
                ahead = self._prefetched
                have = max(self.policy.step if self.policy else -1, ahead[0] if ahead else -1)
                if latest > have:
                    self._prefetched = (latest, *self._fetch_policy(latest, "prefetch weights"))
                    continue
            except Exception as exc:  # noqa: BLE001 - the main loop's own fetch reports what is wrong
                log.debug("prefetching the newest policy failed: %s: %s", exc.__class__.__name__, exc)
            self._prefetch_stop.wait(PREFETCH_POLL_S)

    def pause_s(self) -> float:
        """How long the run loop waits after a `step_once` that sent nothing: until the next look at our verdicts when
        it stopped at --max-pending (no head polling in between: a verdict is read when the look is due)."""
        if self._awaiting_demand:
            return PACE_POLL_S
        if self._awaiting_verdicts:
            return max(0.0, self._verdict_looked_at + min(self._verdict_gap, IDLE_LOOK_S) - time.monotonic())
        return self.opt.poll_interval_s

    def step_once(self, stop: threading.Event, look_every: float = 0.0) -> bool:
        """Sync to the newest checkpoint and make one submission if this step still wants one. `look_every`: the pool's
        state and our verdicts may be as old as that (the run loop's; 0: read now)."""
        pool = self.watch.pool(look_every)
        if pool.active and pool.latest_step == self._quiet_step:
            self._verdicts(QUIET_VERDICT_LOOK_S)  # for the claims, the metrics and the re-stake cap
            return False  # our files for this step are all made; nothing changes until a new step
        self._quiet_step = None
        if not pool.active:
            stop.set()
            return False
        self.pacer.latest_step(pool.latest_step)
        self._awaiting_demand = self.opt.pace and not self.pacer.may_generate()
        if self._awaiting_demand:
            self.stats.last_event = f"paced: the trainer holds enough files for step {pool.latest_step + 1}"
            return False
        if self.batched is not None:
            return self._batched_step(pool.latest_step, stop, look_every)
        member = None
        if self.journal.submitted_count(pool.latest_step) >= self.opt.submissions_per_step:
            member = self._member_now()  # the journal says this step is done: the chain's pin says whether it is
            if member.pinned_step == pool.latest_step:
                self._quiet_step = pool.latest_step
                self._verdicts(QUIET_VERDICT_LOOK_S)
                return False
        # the gate first: a worker at --max-pending reads its verdicts when a look is due, and nothing else (a caller
        # that asks for the pool's state now, look_every 0, asks for the verdicts now too)
        self._awaiting_verdicts = self._verdicts(min(look_every, IDLE_LOOK_S)) >= self.opt.max_pending
        if self._awaiting_verdicts:
            return False
        member = member or self._member_now()
        if pool.latest_step - member.pinned_step > pool.async_level:
            # We stopped for longer than the async level: the pinned step is gone, so give up its nonce.
            log.warning("nonce %d was pinned to step %d, now stale (latest %d); skipping it", member.next_nonce,
                        member.pinned_step, pool.latest_step)
            self.ledger.pool.skip_nonce(self.opt.pool_id)
            member = self.member()
        if member.pinned_step == pool.latest_step and \
                self.journal.submitted_count(pool.latest_step) >= self.opt.submissions_per_step:
            self._quiet_step = pool.latest_step
            return False
        if self.policy is None or self.policy.step != member.pinned_step:
            self.sync_policy(member.pinned_step)
        if self._refused == (self.policy.step, self.policy.manifest_digest):
            self._quiet_step = pool.latest_step  # nothing to do on it; the pin goes stale and is skipped above
            return False
        if not self._court_can_judge:
            if not self.court_has_judge():
                return False
            self._court_can_judge = True
        added = stake_for_next_submission(self.ledger, self.opt.pool_id, pool.min_stake, pool.slash_amount,
                                          member=member)
        if added and self.stats.challenges:
            self.stats.restaked += added
            self.metrics.restaked.inc(added / 10**18)
            log.warning("re-staked %s to the pool allocation after %d slash(es) (%s in all; --max-restakes %s)",
                        tokens(added), len(self.stats.challenges), tokens(self.stats.restaked), self.opt.max_restakes)
        self.submit_one(next_binding(self.ledger, self.opt.pool_id, member), stop)
        return True

    def _batched_step(self, latest: int, stop: threading.Event, look_every: float) -> bool:
        """One leaf of the current epoch on the newest policy (worker/batched.py), unless this step has its files or
        the epoch its `maxLeaves`: then what is made is signed and posted, and the chain's clock is read at most once
        per `look_every` while idle."""
        b = self.batched
        done = b.made_at(latest) >= self.opt.submissions_per_step
        if done and time.monotonic() - self._batched_looked < look_every:
            return False
        self._batched_looked = time.monotonic()
        epoch = b.epoch_now(self.watch.chain_time())
        if epoch < b.first_epoch():
            self.stats.last_event = f"bond counts from epoch {b.first_epoch()}; now epoch {epoch}"
            return False
        counter = b.next_counter(epoch)
        if done or counter is None:
            b.post(epoch, all_leaves=True)
            if counter is None:
                self.stats.last_event = f"epoch {epoch}'s {b.params.max_leaves} leaves are made"
            return False
        b.post(epoch, all_leaves=False)  # earlier epochs' leaves first
        if self.policy is None or self.policy.step != latest:
            self.sync_policy(latest)
        if self._refused == (self.policy.step, self.policy.manifest_digest):
            return False
        binding = b.binding(self.policy.step, epoch, counter, b.beacon(epoch))
        try:
            data, n_samples = self.produce(self.policy, self.spec, binding)
        except UnrunnablePolicy as exc:
            self._refuse(exc)
            return False
        if stop.is_set():  # SIGTERM during generation: nothing journaled, the counter is free
            return True
        digest = b.add_leaf(epoch, counter, self.policy.step, data, n_samples)
        b.post(epoch, all_leaves=False)
        self.pacer.submitted()
        self.stats.submitted += 1
        self.metrics.submissions.inc()
        self.metrics.samples.inc(n_samples)
        self.stats.last_event = f"leaf {counter} of epoch {epoch}: {n_samples} samples for step {self.policy.step}"
        log.info("made leaf %d of epoch %d (0x%s): %d samples for step %d", counter, epoch, digest, n_samples,
                 self.policy.step)
        return True

    def _verdicts(self, longest_wait: float = IDLE_LOOK_S) -> int:
        """Our submissions awaiting a verdict: the journal's open ones, the chain asked about them only when a look is
        due — `poll_interval_s` after a submission or a verdict, then at waits doubling up to `longest_wait` while none
        comes (for --max-pending, the claims, the verdicts' metrics and the re-stake cap). The worker at --max-pending
        polled the head every poll interval and read every open submission at each new block: ~10 requests a file at
        2 s blocks while the validator judged; once its step's files were made it read no verdict until the next step
        (issue 46)."""
        open_ = len(self.journal.open_submissions())
        if not open_ or time.monotonic() < self._verdict_looked_at + min(self._verdict_gap, longest_wait):
            return min(open_, self._last_look[1] + max(0, open_ - self._last_look[0]))  # that look's, and those since
        pending = self.pending_verdicts(oldest_first=True)
        still_open = len(self.journal.open_submissions())
        self._last_look = (still_open, pending)
        self._verdict_gap = self.opt.poll_interval_s if still_open < open_ else \
            min(QUIET_VERDICT_LOOK_S, 2 * self._verdict_gap)
        self._verdict_looked_at = time.monotonic()
        return pending

    def _submitted(self) -> None:
        """A submission was mined: its verdict is looked for `poll_interval_s` later, then at the doubling waits."""
        self._verdict_gap = self.opt.poll_interval_s
        self._verdict_looked_at = time.monotonic()

    def court_has_judge(self) -> bool:
        """Whether a validator of the pool's court has been registered for the court's activation delay and has not
        left: a case is judged by the validators active that long before its submission, so a file submitted
        earlier has nobody eligible and waits out the assigned window (logged once while waiting)."""
        court, pool_id = self._court, self.opt.pool_id
        assert court is not None
        if court.active_count(pool_id) > 0:
            delay, now = court.get_params(pool_id).activation_delay, chain_time(self.ledger)
            registered = self.ledger.logs.scan(court.contract.events.ValidatorRegistered, {"poolId": pool_id},
                                               self.ledger.deployment.block)
            if any(eligible_judge(court.get_validator(pool_id, e["args"]["validator"]), delay, now)
                   for e in registered):
                return True
        if not self._judge_wait_logged:
            log.info("pool %d: no validator of its court is eligible to judge yet; waiting before the first file",
                     pool_id)
            self._judge_wait_logged = True
        return False

    def _challenged(self, work_id: bytes) -> None:
        """Say why our work was challenged, with a link to the evidence; stop when re-staking is capped."""
        found = challenges_of(self.ledger, self.ledger.address, self.opt.pool_id, self.opt.explorer, {work_id})
        c = found[-1] if found else {"work_id": WorkId(work_id).text, "reason": "?", "slashed": 0, "evidence": None,
                                     "explain": None}
        if any(e.get("forced") and e.get("work_id") == work_id.hex() for e in self.journal.entries()):
            log.info("work %s, a forced error this worker owed, was caught as it should be: its slash %s is refunded "
                     "and its reward paid once its epoch is settled (docs/protocol.md R9.26)", c["work_id"],
                     tokens(int(c["slashed"])))
            self.stats.last_event = f"forced error {c['work_id']} caught (slash refunded, reward paid at settlement)"
            return  # not a fault of the worker: no count toward --max-restakes
        self.stats.challenges.append(c)
        self.metrics.challenged(c)
        where = c["explain"] or c["evidence"] or "no evidence document"
        self.stats.last_event = f"challenged {c['reason']}: work {c['work_id']} slashed {tokens(int(c['slashed']))}"
        log.warning("work %s was challenged (%s): slashed %s; why: %s", c["work_id"], c["reason"],
                    tokens(int(c["slashed"])), where)
        cap = self.opt.max_restakes
        if cap is not None and len(self.stats.challenges) > cap:
            raise RestakeCapReached(f"slashed {len(self.stats.challenges)} times, the last for {c['reason']} (work "
                                    f"{c['work_id']}, why: {where}); --max-restakes {cap}: not re-staking; see "
                                    "`worker status` and fix the worker before restarting it")

    def pending_verdicts(self, oldest_first: bool = False) -> int:
        """How many of our submissions still await a verdict (statuses are final once judged), asking the chain now.
        `oldest_first`: stop at the first one still awaiting its verdict, counting those after it as awaiting theirs
        (a validator judges in submission order, mostly: one read a look while it has not judged the oldest)."""
        open_ = 0
        submissions = self.journal.open_submissions()
        for i, e in enumerate(submissions):
            if oldest_first and open_:
                open_ += len(submissions) - i
                break
            work_id = bytes.fromhex(e["work_id"])
            # a court pool's case is one read: without a verdict it is open; with one not final yet its work is
            # pending; a final case is the work's outcome (the court records it in the pool in the same transaction)
            case = self._court.cases(work_id) if self._court is not None else None
            if case is not None and case.state in (CaseState.PENDING, CaseState.VERDICT, CaseState.DISPUTED):
                open_ += case.state == CaseState.PENDING
                continue
            try:
                if case is not None and case.state == CaseState.FINAL:
                    status = WorkStatus.ACCEPTED if case.accepted else WorkStatus.REJECTED
                    submitted_at = case.submitted_at
                else:  # no court, a void case, or none (a reorg dropped the submission)
                    work = get_work(self.ledger, work_id)
                    status, submitted_at = work.status, work.submitted_at
            except errors.UnknownWork:
                # A chain reorganisation dropped the submission: resubmit it with its nonce (recover() does that).
                log.warning("submission 0x%s vanished from the chain (reorg); resubmitting", e["digest"])
                self.journal.advance(e["nonce"], "uploaded")
                self.recover()
                return self.pending_verdicts()
            if status == WorkStatus.PENDING:
                open_ += self._court is None  # a court pool's void case: its work waits to expire, not for a verdict
            else:
                self.journal.advance(e["nonce"], "submitted", final=status.name.lower(), submitted_at=submitted_at)
                self.metrics.verdict(status.name.lower())
                self.stats.verdicts[status.name.lower()] = self.stats.verdicts.get(status.name.lower(), 0) + 1
                if status == WorkStatus.REJECTED:
                    self._challenged(bytes.fromhex(e["work_id"]))
        self.metrics.pending.set(open_)
        return open_

    def sync_policy(self, step: int) -> None:
        """Make the policy of `step` the one generating: the prefetched one if it is that step's, else fetched now."""
        ahead = self._prefetched
        if ahead is not None and ahead[0] == step:
            _, digest, fetched = ahead
        else:
            self.stats.last_event = f"fetching checkpoint of step {step}"
            digest, fetched = self._fetch_policy(step, "fetch weights")
        if self._prefetched is not None and self._prefetched[0] <= step:
            self._prefetched = None
        with phase("load weights"):
            model, tokenizer = self.load(fetched.path)
        self.policy = Policy(step, digest, model, tokenizer, folder=fetched.path)
        self.stats.step = step
        self.metrics.policy_step.set(step)
        self.stats.last_event = f"loaded policy of step {step}"

    def _fetch_policy(self, step: int, what: str) -> tuple[bytes, FetchedCheckpoint]:
        """The pool's checkpoint of `step`: its digest and verified local copy; one fetch at a time (they share
        the pins' record)."""
        with self._fetch_lock, phase(what):
            ahead = self._prefetched
            if ahead is not None and ahead[0] == step:  # the other thread fetched it while this one waited
                return ahead[1], ahead[2]
            digest = bytes(self.ledger.pool.checkpoint_at(self.opt.pool_id, step))
            retention = PinRetention(self.kubo, self.opt.work_dir / "pins.json",
                                     keep=versions_to_keep(self.pool.async_level))
            log.info("%s: the policy of step %d (%s) from IPFS", what, step, hex_text(digest))
            fetched = fetch_checkpoint(self.kubo, digest, self.opt.work_dir / "checkpoints",
                                       timeout=self.opt.fetch_timeout_s, retention=retention)
            log.info("%s: the policy of step %d, %.1f MB, %d files downloaded (the rest held already), in %.1f s",
                     what, step, fetched.manifest.total_bytes / 1e6, len(fetched.downloaded), fetched.seconds)
        if self.opt.pace:
            self.pacer.observe(step, self._demand_note(fetched))
        return digest, fetched

    def _demand_note(self, fetched: FetchedCheckpoint) -> DemandNote | None:
        """The trainer's demand note in the metrics object the checkpoint's manifest names (None: none, or not
        readable: the worker then generates unpaced)."""
        cid = fetched.manifest.metrics
        if cid is None:
            return None
        try:
            return DemandNote.from_metrics(json.loads(get_object(self.kubo, cid_to_digest(cid), timeout=10.0)))
        except (ContentError, ValueError) as exc:
            log.debug("no demand note for step %d: %s", fetched.manifest.step, exc)
            return None

    def submit_one(self, binding: SubmissionBinding, stop: threading.Event) -> None:
        pid = self.opt.pool_id
        nonce, step = binding.nonce, binding.step
        try:
            data, n_samples = self.produce(self.policy, self.spec, binding)
        except UnrunnablePolicy as exc:
            self._refuse(exc)
            return
        if stop.is_set():  # SIGTERM during generation: abandon cleanly (nothing uploaded or submitted)
            return
        forced = False
        if self.chain is not None:
            planted = self._owed_error(binding, data, stop)
            if planted is None:
                return
            data, forced = planted
        files = self.opt.work_dir / "rollouts"
        files.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(data).digest()
        path = files / f"{digest.hex()}.parquet"
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        self.journal.record(nonce, step, digest=digest.hex(), work_id=binding.work_id.hex(), file=str(path),
                            n_samples=n_samples, **({"forced": True} if forced else {}))
        self.upload(self.kubo, data)
        self.journal.advance(nonce, "uploaded")
        for attempt in range(3):
            try:
                self.ledger.pool.submit_work(pid, step, nonce, digest, n_samples)
                break
            except errors.InsufficientAllocation:
                if attempt == 2:
                    raise
                # slashed meanwhile: top up and retry
                stake_for_next_submission(self.ledger, pid, self.pool.min_stake, self.pool.slash_amount)
            except (errors.StaleStep, errors.StepNotPinned, errors.UnknownStep, errors.PoolNotActive,
                    errors.InsufficientBudget) as exc:
                log.warning("submission for step %d refused: %s", step, exc)
                self.journal.drop(nonce)
                return
        self.journal.advance(nonce, "submitted")
        self._submitted()
        self.pacer.submitted()
        self.stats.submitted += 1
        self.metrics.submissions.inc()
        self.metrics.samples.inc(n_samples)
        self.stats.last_event = f"submitted {n_samples} samples for step {step}"
        log.info("submitted %s: %d samples for step %d (nonce %d)", hex_text(digest), n_samples, step, nonce)

    def _owed_error(self, binding: SubmissionBinding, data: bytes, stop: threading.Event) -> tuple[bytes, bool] | None:
        """The file with a forced error planted if the worker's chain says it owes one (worker.forced), decided for the
        epoch the submission will be mined in once its beacon is recorded: near an epoch's end it waits for the next
        (None: stopped meanwhile)."""
        now = self.watch.chain_time()
        while wait := self.chain.wait_s(now):
            log.info("waiting %d s for the forced-error epoch and its beacon before submitting nonce %d", wait,
                     binding.nonce)
            if stop.wait(wait):
                return None
            now = max(now + wait, self.watch.chain_time())
        backend_for = getattr(self.produce, "backend_for", None)  # the producer's engine; else the torch one

        def backend():
            return backend_for(self.policy, self.spec) if backend_for else torch_backend_of(self.policy)

        data, forced = with_owed_error(self.chain, binding.work_id, now, data, self.spec, backend, self.policy.tokenizer)
        if forced:
            self.stats.forced_errors += 1
            self.stats.last_event = f"planted a forced error in nonce {binding.nonce}, as its chain says it owes"
            log.info("nonce %d owes a forced error (this worker's chain): planted; once caught, its slash is refunded "
                     "and its reward paid at settlement", binding.nonce)
        return data, forced

    def _refuse(self, exc: UnrunnablePolicy) -> None:
        """Generate nothing more on the current policy, saying so once: a checkpoint nobody can run is the trainer's
        fault, and a file made on it anyway could only be wrong."""
        self._refused = (self.policy.step, self.policy.manifest_digest)
        self.stats.last_event = f"refused the policy of step {self.policy.step}"
        log.error("%s; generating nothing on step %d: waiting for a usable policy (this worker's next nonce is pinned "
                  "to step %d and is skipped once the pool is more than %d steps past it)", exc, self.policy.step,
                  self.policy.step, self.pool.async_level)

    def maybe_claim(self, force: bool = False) -> int:
        """Claim what is due, every `claim_interval_s`: the journal's accepted submissions whose reward lock has
        passed (reading the chain only for those: the journal grows with every file); `force`: every accepted
        submission of ours on the chain, past runs' included."""
        if not force and time.monotonic() - self._last_claim < self.opt.claim_interval_s:
            return 0
        self._last_claim = time.monotonic()
        if self.chain is not None:
            self._withdraw_refunds()
        if self.batched is not None:
            return self._claim_batched()
        if force:
            amount = claim_all(self.ledger, self.opt.pool_id)
        else:
            accepted = [e for e in self.journal.entries("submitted") if e.get("final") == "accepted"]
            if not accepted:
                return 0  # nothing to claim: the chain's clock is not asked
            first_due = min(e.get("submitted_at", 0) for e in accepted) + self.pool.reward_lock_s
            now = self._chain_now(first_due)
            due = [e for e in accepted if e.get("submitted_at", 0) + self.pool.reward_lock_s <= now]
            if not due:
                return 0
            amount = claim_works(self.ledger, [bytes.fromhex(e["work_id"]) for e in due], now)
            for e in due:  # claimed now, or (a restart) before: accepted work is claimed exactly once
                self.journal.advance(e["nonce"], "submitted", final="paid")
        self.stats.claimed += amount
        self.metrics.claimed.inc(amount / 10**18)
        return amount

    def _claim_batched(self) -> int:
        """Claim the runs whose batches' windows closed (worker/batched.py); top the bond up after a slash."""
        b = self.batched
        amount = b.claim_due(self.watch.chain_time())
        voided = len(b.voided_leaves)
        if voided != self.stats.verdicts.get("challenged", 0):
            self.stats.verdicts["challenged"] = voided
            log.warning("%d of this worker's leaves were challenged and voided by a validator (slashed from its "
                        "WorkBatches bond)", voided)
            b.lock_bond()
        self.stats.claimed += amount
        self.metrics.claimed.inc(amount / 10**18)
        return amount

    def _chain_now(self, first_due: int) -> int:
        """The chain's clock for a claim: read (the latest block's timestamp) unless the last reading plus the wall time
        since is still before `first_due` and younger than CHAIN_TIME_CHECK_S — then that estimate, which only decides
        that nothing is due yet (a chain's clock does not run ahead of the wall's except by a devnet's jump, which the
        next reading sees)."""
        if self._chain_time is not None:
            read_at, then = self._chain_time
            elapsed = time.monotonic() - read_at
            if then + elapsed < first_due and elapsed < CHAIN_TIME_CHECK_S:
                return int(then + elapsed)
        now = self.watch.chain_time()
        self._chain_time = (time.monotonic(), now)
        return now

    def _withdraw_refunds(self) -> None:
        """Withdraw what ForcedErrors credits this worker: the slash of each forced error it owed and planted, refunded
        with the file's reward once its epoch is settled (R9.26)."""
        fe = self.ledger.forced_errors
        credits = fe.credits(self.ledger.address)
        if credits:
            fe.withdraw()
            log.info("withdrew %s of forced-error refunds and rewards", tokens(credits))

    def verdict_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for e in self.journal.entries("submitted"):
            status = get_work(self.ledger, bytes.fromhex(e["work_id"])).status
            counts[status.name.lower()] = counts.get(status.name.lower(), 0) + 1
        return counts


def status_table(daemon: WorkerDaemon) -> Table:
    s = daemon.stats
    table = Table(title=f"worker {daemon.ledger.address} — pool {daemon.opt.pool_id}", show_header=False)
    compute = getattr(daemon.produce, "compute", None)
    if compute is not None:
        table.add_row("engine", compute.describe())
    table.add_row("policy step", str(s.step))
    table.add_row("submitted", str(s.submitted))
    table.add_row("claimed", tokens(s.claimed))
    table.add_row("verdicts", ", ".join(f"{k} {v}" for k, v in sorted(s.verdicts.items())) or "none yet")
    for c in s.challenges[-5:]:  # why each challenge happened, where to read the evidence
        table.add_row(f"challenged {c['reason']}", f"work {c['work_id']}, slashed {tokens(int(c['slashed']))}"
                      f"{', re-staked ' + tokens(s.restaked) if s.restaked else ''}\n"
                      f"why: {c['explain'] or c['evidence'] or 'no evidence document'}")
    table.add_row("last", s.last_event)
    return table


def run_from_args(args: argparse.Namespace, ledger: Ledger | None = None) -> int:
    """`worker start`: the daemon of `args`, on `ledger` (default: the one `args` name)."""
    compute = compute_of(args)
    ledger = ledger or open_ledger(args)
    devnet = load_devnet_info(args.devnet_dir)
    kubo_api = args.kubo_api or (devnet or {}).get("kubo_api")
    if not kubo_api:
        raise UsageError("no --kubo-api given and no devnet is up")
    work_dir = args.work_dir or Path(".worker") / ledger.address
    options = WorkerOptions(pool_id=args.pool, kubo_api=kubo_api, work_dir=work_dir,
                            submissions_per_step=args.submissions_per_step, poll_interval_s=args.poll_interval,
                            max_submissions=args.max_submissions, max_pending=args.max_pending,
                            max_restakes=None if args.max_restakes < 0 else args.max_restakes, explorer=args.explorer,
                            pace=not args.no_pace, run_leaves=args.run_leaves)
    daemon = WorkerDaemon(ledger, options, Producer(compute), PolicyLoader(), metrics=WorkerMetrics())
    if args.metrics_port:
        daemon.metrics.serve(args.metrics_port)
    daemon.prepare()  # stake, join, first policy: Ctrl-C here stops at once (a rerun resumes)
    stop = threading.Event()
    exit_code = stop_on_signals(stop)
    if args.quiet or args.json or args.log_format == "json":  # the live screen would be garbled by log lines
        configure_logging(args)
        log.info("generating with %s", compute.describe())
        daemon.run(stop)
    else:
        with Live(get_renderable=lambda: status_table(daemon), refresh_per_second=2, console=Console()):
            daemon.run(stop)
    daemon.maybe_claim(force=True)
    if args.json:
        print(json.dumps({"submitted": daemon.stats.submitted, "claimed": daemon.stats.claimed,
                          "verdicts": daemon.verdict_counts()}))
    return exit_code()
