"""A file made before a crash and resubmitted after it (worker.forced.resubmittable, docs/protocol.md R9.26): the epoch
its submission lands in decides what it owes, so it goes as made only where that epoch's duty is the one it carries —
planted where owed, clean where not — and is made again otherwise."""

from __future__ import annotations

from types import SimpleNamespace

from protocol.hashchain import Role, chain_secret, drawn, link
from worker.forced import ForcedErrorChain, resubmittable

GENESIS, EPOCH, FORCED_BPS = 1_000, 60, 1_000


def _chain() -> ForcedErrorChain:
    """A worker's chain as `ForcedErrorChain` holds it after `commitChain` (no ledger: only its arithmetic is used)."""
    chain = ForcedErrorChain.__new__(ForcedErrorChain)
    chain.genesis, chain.params = GENESIS, SimpleNamespace(epoch_length=EPOCH, forced_bps=FORCED_BPS)
    chain.secret = chain_secret(b"\x01" * 32, 31337, "0x" + "22" * 20, 1, Role.WORKER, 0)
    chain.chain = SimpleNamespace(first_epoch=1, end_epoch=256)
    return chain


def _epochs(chain: ForcedErrorChain, work_id: bytes) -> tuple[int, int]:
    """An epoch in which `work_id` owes a forced error, and one in which it does not."""
    owed = [drawn(link(chain.secret, 256, e), work_id, FORCED_BPS) for e in range(1, 257)]
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
    # a clean file landing in an epoch that owes one would be an omission (S + R): made again, planted
    assert not resubmittable(chain, work_id, planted=False, landing=at(owes))


def test_past_the_chain_nothing_is_owed_so_a_planted_file_is_made_again():
    chain, work_id = _chain(), bytes.fromhex("cd" * 32)
    after = GENESIS + 300 * EPOCH
    assert not resubmittable(chain, work_id, planted=True, landing=after)
    assert resubmittable(chain, work_id, planted=False, landing=after)
