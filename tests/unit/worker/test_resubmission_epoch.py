"""A file made before a crash and resubmitted after it (worker.forced.resubmittable, docs/protocol.md R9.26): the epoch
its submission lands in decides what it owes, so it goes as made only where that epoch's duty is the one it carries —
planted where owed, clean where not — and is made again otherwise."""

from __future__ import annotations

from types import SimpleNamespace

from eth_utils import keccak

from protocol.hashchain import Role, chain_secret, drawn, link
from worker.forced import ForcedErrorChain, resubmittable

GENESIS, EPOCH, FORCED_BPS = 1_000, 60, 1_000


def _chain() -> ForcedErrorChain:
    """A worker's chain as `ForcedErrorChain` holds it after `commitChain` (no ledger: only its arithmetic is used)."""
    chain = ForcedErrorChain.__new__(ForcedErrorChain)
    chain.genesis, chain.params = GENESIS, SimpleNamespace(epoch_length=EPOCH, forced_bps=FORCED_BPS)
    chain.secret = chain_secret(b"\x01" * 32, 31337, "0x" + "22" * 20, 1, Role.WORKER, 0)
    chain.chain = SimpleNamespace(first_epoch=1, end_epoch=256)
    chain._beacons = {e: keccak(e.to_bytes(32, "big")) for e in range(1, 257)}  # each epoch's, as recorded (R9.29)
    return chain


def _epochs(chain: ForcedErrorChain, work_id: bytes) -> tuple[int, int]:
    """An epoch in which `work_id` owes a forced error, and one in which it does not."""
    owed = [drawn(link(chain.secret, 256, e), chain._beacons[e], work_id, FORCED_BPS) for e in range(1, 257)]
    return owed.index(True) + 1, owed.index(False) + 1


def test_a_file_goes_as_made_only_into_an_epoch_whose_duty_it_carries():
    chain, work_id = _chain(), bytes.fromhex("ab" * 32)
    owes, clean = _epochs(chain, work_id)
    at = lambda e: GENESIS + e * EPOCH + 1  # noqa: E731 - a time inside epoch e
    assert chain.owes(work_id, at(owes)) and not chain.owes(work_id, at(clean))
    assert resubmittable(chain, work_id, planted=True, landing=at(owes))  # the crash did not cross its epoch's end
    assert resubmittable(chain, work_id, planted=False, landing=at(clean))
    # a planted file landing in an epoch that owes nothing would be slashed unrefunded (S): made again, clean
    assert not resubmittable(chain, work_id, planted=True, landing=at(clean))
    # a clean file landing in an epoch that owes one would be an omission (S): made again, planted
    assert not resubmittable(chain, work_id, planted=False, landing=at(owes))


def test_past_the_chain_nothing_is_owed_so_a_planted_file_is_made_again():
    chain, work_id = _chain(), bytes.fromhex("cd" * 32)
    after = GENESIS + 300 * EPOCH
    assert not resubmittable(chain, work_id, planted=True, landing=after)
    assert resubmittable(chain, work_id, planted=False, landing=after)


def test_the_daemon_waits_out_an_epochs_end_and_decides_for_the_epoch_the_resubmission_lands_in():
    """`WorkerDaemon._owes_as_made` (what `recover` asks before resubmitting): near an epoch's end it waits for the next
    epoch, as a first submission does, on the daemon's stop event, and decides for that one; stopped meanwhile, it
    decides nothing (None: the entry stays for the next start)."""
    from worker import daemon as worker_daemon

    chain, work_id = _chain(), bytes.fromhex("ef" * 32)
    owed = [chain.owes(work_id, GENESIS + e * EPOCH + 1) for e in range(1, 257)]
    owes = next(e for e in range(1, 256) if owed[e - 1] and not owed[e])  # owed in this epoch, not in the next
    waited: list[float] = []
    stopped = [False]

    def wait(seconds: float) -> bool:  # threading.Event.wait: True when the event is set
        waited.append(seconds)
        return stopped[0]

    late = GENESIS + (owes + 1) * EPOCH - 5  # inside `owes`, in its last seconds
    fake = SimpleNamespace(chain=chain, watch=SimpleNamespace(chain_time=lambda: late),
                           stopping=SimpleNamespace(wait=wait))
    entry = {"nonce": 3, "work_id": work_id.hex(), "forced": True}
    assert worker_daemon.WorkerDaemon._owes_as_made(fake, entry) is False  # it lands in the next: made again, clean
    assert waited == [6]  # until the next epoch has begun
    stopped[0] = True
    assert worker_daemon.WorkerDaemon._owes_as_made(fake, entry) is None and waited == [6, 6]  # stopped: no decision
    stopped[0] = False
    early = GENESIS + owes * EPOCH + 1
    fake.watch = SimpleNamespace(chain_time=lambda: early)
    assert worker_daemon.WorkerDaemon._owes_as_made(fake, entry) and waited == [6, 6]  # its own epoch: as made, no wait
