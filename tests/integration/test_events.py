"""The event cursor against a real anvil: persistence, confirmations and `anvil_reorg`."""

from __future__ import annotations


import pytest

from ledger_client.chain.errors import LedgerError
from ledger_client.chain.events import EventCursor, Removed
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import pool_state


def _publish(trainer: Ledger, pool_id: int, step: int):
    return trainer.pool.publish_checkpoint(pool_id, step, step.to_bytes(32, "big"))


def _cursor(chain, path, **kw) -> EventCursor:
    return EventCursor(chain.owner.pool, ["CheckpointPublished"], path, start_block=chain.deployment.block, **kw)


def _steps(events) -> list[int]:
    return [e.step for e in events if not isinstance(e, Removed)]


def test_cursor_resumes_after_restart_without_duplicates(chain, tmp_path):
    state = tmp_path / "cursor.json"
    cursor = _cursor(chain, state)
    assert _steps(cursor.poll()) == [0]
    cursor.commit()
    for s in (1, 2):
        _publish(chain.trainer, chain.pool_id, s)
    uncommitted = _cursor(chain, state)
    assert _steps(uncommitted.poll()) == [1, 2]  # not committed: a crash here re-delivers them
    restarted = _cursor(chain, state)
    assert _steps(restarted.poll()) == [1, 2]
    restarted.commit()
    assert _cursor(chain, state).poll() == []
    assert restarted.state["next_block"] == chain.w3.eth.block_number + 1


def test_cursor_waits_for_confirmations(chain, tmp_path):
    cursor = _cursor(chain, tmp_path / "c.json", confirmations=2)
    cursor.poll()
    _publish(chain.trainer, chain.pool_id, 1)
    assert cursor.poll() == []
    chain.rpc("anvil_mine", [1])
    assert cursor.poll() == []
    chain.rpc("anvil_mine", [1])
    assert _steps(cursor.poll()) == [1]


def test_reorg_depth_3_delivers_nothing_twice_and_skips_nothing(chain, tmp_path):
    trainer = chain.trainer
    cursor = _cursor(chain, tmp_path / "c.json")
    seen = _steps(cursor.poll())
    receipts = {s: _publish(trainer, chain.pool_id, s) for s in (1, 2, 3, 4, 5)}  # one block each
    seen += _steps(cursor.poll())
    cursor.commit()
    assert seen == [0, 1, 2, 3, 4, 5]

    # Reorg the last 3 blocks (steps 3, 4, 5); the new chain re-includes step 3's transaction.
    raw3 = chain.w3.eth.get_raw_transaction(receipts[3]["transactionHash"])
    result = chain.rpc("anvil_reorg", [3, [[raw3.to_0x_hex(), 0]]])
    assert "error" not in result, result
    assert pool_state(chain.owner, chain.pool_id).latest_step == 3  # latest step is 3 on the new chain

    out = cursor.poll()
    removed = [e for e in out if isinstance(e, Removed)]
    assert _steps(out) == []  # step 3 was re-included: already delivered, not delivered again
    assert sorted(r.key.split(":")[0] for r in removed) == sorted(
        receipts[s]["transactionHash"].to_0x_hex() for s in (4, 5))
    cursor.commit()

    fresh_trainer = Ledger(chain.w3, chain.deployment, chain.accounts[2])  # new sender: nonces from the new chain
    _publish(fresh_trainer, chain.pool_id, 4)
    assert _steps(cursor.poll()) == [4]
    assert cursor.poll() == []


def test_reorg_deeper_than_confirmations_is_never_seen(chain, tmp_path):
    cursor = _cursor(chain, tmp_path / "c.json", confirmations=4)
    _publish(chain.trainer, chain.pool_id, 1)
    chain.rpc("anvil_mine", [4])
    assert _steps(cursor.poll()) == [0, 1]
    _publish(chain.trainer, chain.pool_id, 2)  # not yet confirmed when the reorg drops it
    chain.rpc("anvil_reorg", [3, []])
    chain.rpc("anvil_mine", [6])
    assert cursor.poll() == []


def test_cursor_refuses_a_state_file_of_another_contract(chain, tmp_path):
    state = tmp_path / "c.json"
    cursor = _cursor(chain, state)
    cursor.poll()
    cursor.commit()
    with pytest.raises(LedgerError, match="belongs to chain"):
        EventCursor(chain.owner.stake, ["Bonded"], state)
    state.write_text("{not json")
    with pytest.raises(LedgerError, match="corrupt"):
        _cursor(chain, state)


@pytest.mark.parametrize("blocks_after", [0, 1])
def test_a_reorg_of_the_newest_block_is_seen_when_the_head_is_it_or_its_child(chain, tmp_path, blocks_after):
    """The cursor trusts its newest recorded block without asking for it when the latest block is that block or its
    child: a reorg that replaced it (same height, or one block more on the new branch) is still seen."""
    cursor = _cursor(chain, tmp_path / "c.json")
    cursor.poll()
    receipt = _publish(chain.trainer, chain.pool_id, 1)
    assert _steps(cursor.poll()) == [1]
    chain.rpc("anvil_reorg", [1, []])  # the block with step 1 replaced by an empty one
    if blocks_after:
        chain.rpc("anvil_mine", [blocks_after])
    out = cursor.poll()
    assert [r.key.split(":")[0] for r in out if isinstance(r, Removed)] == [receipt["transactionHash"].to_0x_hex()]


def test_a_poll_without_a_new_block_is_one_request(chain, tmp_path, monkeypatch):
    from ledger_client.chain.ledger import RPC_LOG_ENV, connect

    log = tmp_path / "rpc.jsonl"
    monkeypatch.setenv(RPC_LOG_ENV, str(log))
    owner = Ledger(connect(chain.anvil.rpc_url), chain.deployment, chain.accounts[0])
    cursor = EventCursor(owner.pool, ["CheckpointPublished"], None, start_block=chain.deployment.block)
    cursor.poll()
    _publish(chain.trainer, chain.pool_id, 1)
    before = len(log.read_text().splitlines())
    assert _steps(cursor.poll()) == [1]  # one new block: the latest block and the logs
    middle = len(log.read_text().splitlines())
    assert cursor.poll() == []
    assert (middle - before, len(log.read_text().splitlines()) - middle) == (2, 1)


def test_a_state_file_is_taken_up_by_a_cursor_that_follows_added_events(chain, tmp_path):
    """An upgrade that follows one more event (the validator's court cursor: VerdictFinal, CaseVoided) keeps its
    position; any other change of the events is still refused."""
    state = tmp_path / "c.json"
    cursor = _cursor(chain, state)
    cursor.poll()
    cursor.commit()
    with pytest.raises(LedgerError, match="follows"):
        EventCursor(chain.owner.pool, ["CheckpointPublished", "PoolFunded"], state)
    grown = EventCursor(chain.owner.pool, ["CheckpointPublished", "PoolFunded"], state, added_events=["PoolFunded"])
    assert grown.next_block == cursor.next_block
    _publish(chain.trainer, chain.pool_id, 1)
    assert _steps(grown.poll()) == [1]
    grown.commit()
    with pytest.raises(LedgerError, match="follows"):  # the file now follows both: the old set no longer fits it
        _cursor(chain, state)


def test_a_cursor_for_one_pool_reads_only_its_pools_events(chain, tmp_path):
    """With `pool_id` the node matches the pool id as the first indexed topic: the cursor gets its pool's events
    only, and refuses to follow an event that has no indexed poolId first."""
    from deploy.pools import create_pool
    from tests.support.conftest_chain import pool_config

    other = create_pool(chain.owner, pool_config(chain.accounts))
    for s in (1, 2):
        _publish(chain.trainer, other, s)
    _publish(chain.trainer, chain.pool_id, 1)
    mine = _cursor(chain, tmp_path / "mine.json", pool_id=chain.pool_id)
    theirs = _cursor(chain, tmp_path / "theirs.json", pool_id=other)
    assert [(e.pool_id, e.step) for e in mine.poll()] == [(chain.pool_id, 0), (chain.pool_id, 1)]
    assert [(e.pool_id, e.step) for e in theirs.poll()] == [(other, 0), (other, 1), (other, 2)]
    with pytest.raises(LedgerError, match="RewardsClaimed"):
        EventCursor(chain.owner.pool, ["RewardsClaimed"], None, pool_id=chain.pool_id)
