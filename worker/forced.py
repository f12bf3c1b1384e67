"""A worker's forced errors (docs/protocol.md R9.26; decision 0009 §2): its own committed hash chain, mixed with the
epoch's beacon (R9.29), says which of its files owe one, and an owed file carries one planted exactly as the protocol says — its first completion's first
sampled token replaced by the lowest-probability one under the policy, and that completion's claimed reward flipped —
so that the reward check and the sampling replay flag it at every tolerance. The worker is not slashed for it in the
end, and is paid for it as for an honest file (`settle` refunds the slash and pays the file's reward, so holding an owed
file for another epoch gains nothing: R9.28 (7)); one it omits costs it S, one it plants unowed S and the file's reward.
"""

from __future__ import annotations

from collections.abc import Callable

from inference.backend import InferenceBackend
from ledger_client.chain.hashchains import CommittedChain
from ledger_client.chain.ledger import Ledger
from protocol.hashchain import Role, drawn
from protocol.rollouts import RolloutBatch, decode_rollouts, encode_rollouts
from protocol.runspec import RunSpec
from tasks.registry import build_task
from tasks.rewards import rewards_equal
from tasks.sandbox import scoring_session

EPOCH_MARGIN_S = 30
"""A file is not submitted in the last this-many seconds of an epoch (at most a quarter of the epoch): its epoch,
which decides whether it owes a forced error, is the one its submission is mined in."""


class ForcedErrorChain(CommittedChain):
    """The worker's chain: which files owe a forced error."""

    @classmethod
    def of(cls, ledger: Ledger, pool_id: int, role: Role = Role.WORKER, spare: int = 0) -> ForcedErrorChain | None:
        return super().of(ledger, pool_id, role, spare)

    def margin(self) -> int:
        return min(EPOCH_MARGIN_S, self.params.epoch_length // 4)

    def wait_s(self, now: int) -> int:
        """Seconds to wait before submitting at chain time `now` so that the submission lands in the epoch it was
        decided for, and that epoch's beacon is recorded (it records it if nobody has: R9.29): 0 once both hold,
        until the next epoch near an epoch's end, else a second (the anchor's next block)."""
        end = self.epoch_end(self.epoch(now))
        if now + self.margin() >= end:
            return end - now + 1
        return 0 if self.record_beacon(now) is not None else 1

    def owes(self, work_id: bytes, submitted_at: int) -> bool:
        """Whether the file `work_id` submitted at chain time `submitted_at` owes a forced error (False where no chain
        of this key covers its epoch: then nothing is owed, R9.28). Only once the epoch's beacon is settled
        (`wait_s`): before, nobody can know."""
        value = self.link_at(submitted_at)
        if value is None:
            return False
        beacon = self.beacon(self.epoch(submitted_at))
        if beacon is None:
            raise ValueError(f"epoch {self.epoch(submitted_at)}'s beacon is not recorded yet: what the file owes is unknown")
        return drawn(value, beacon, work_id, self.params.forced_bps)


def resubmittable(chain: ForcedErrorChain, work_id: bytes, planted: bool, landing: int) -> bool:
    """Whether a file made before a crash — with a forced error `planted` or not — may be submitted as it is to land at
    chain time `landing`: the epoch a submission is mined in decides what its file owes (`ForcedErrors.settle`), so it
    goes only if that epoch's duty is what it carries; otherwise it is made again for that epoch (docs/protocol.md
    R9.26: a crash never carries a decision into another epoch)."""
    return chain.owes(work_id, landing) == planted


def flipped(task, problem, text: str, n_tokens: int) -> float:
    """A claimed reward the reward check refuses: 1 − the task's reward (2 when that would still match)."""
    true = task.reward(problem, text, n_tokens)
    claim = 1.0 - true
    return claim if not rewards_equal(true, claim) else true + 1.0


def plant_forced_error(batch: RolloutBatch, spec: RunSpec, backend: InferenceBackend, tokenizer) -> RolloutBatch:
    """`batch` with a forced error in its first completion: its first token replaced by the one the policy gives the
    lowest probability after the prompt, and its claimed reward flipped (decision 0009 §2)."""
    first = batch.samples[0]
    logits = backend.prefill(first.prompt_ids, first.completion_ids).logits[0]
    ids = [int(logits.argmin()), *first.completion_ids[1:]]
    task = build_task(spec.task)
    with scoring_session():
        claim = flipped(task, task.problem(first.prompt_index), tokenizer.decode(ids, skip_special_tokens=True), len(ids))
    planted = first.model_copy(update={"completion_ids": ids, "reward": claim})
    return RolloutBatch(header=batch.header, samples=[planted, *batch.samples[1:]])


def with_owed_error(chain: ForcedErrorChain, work_id: bytes, submitted_at: int, data: bytes, spec: RunSpec,
                    backend: Callable[[], InferenceBackend], tokenizer) -> tuple[bytes, bool]:
    """The file to submit as `work_id` at chain time `submitted_at`: `data` as made, or — when the worker's chain says
    the file owes a forced error — with one planted (`plant_forced_error`, on the policy `backend()` gives); and
    whether it was."""
    if not chain.owes(work_id, submitted_at):
        return data, False
    return encode_rollouts(plant_forced_error(decode_rollouts(data), spec, backend(), tokenizer)), True
