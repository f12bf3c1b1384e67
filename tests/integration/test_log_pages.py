"""Log reads in pages against a real anvil: a role restarted after many pages of blocks catches up without asking any
`eth_getLogs` for more than its page of blocks, and finds every event (ledger_client.chain.logs)."""

from __future__ import annotations

import json
import os

import pytest

from deploy.pools import CourtConfig, create_pool
from ledger_client.chain.events import EventCursor
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.logs import REORG_BLOCKS, LogReader, pages
from ledger_client.chain.queries import claimed_total, pool_created_in, submitted_event, works_of
from tests.support.conftest_chain import TOKENS, pool_config
from validator.court import register_with_court, validator_status
from worker.account import challenges_of
from worker.daemon import WorkerDaemon, WorkerOptions

PAGE = 500
GAP = 5 * PAGE + 100
"""Blocks mined while the role is down: more than five pages. The issue's case is a 10,000-block page and a 50,000-block
gap (about 28 hours of 2 s blocks), the same walk 20 times longer; anvil mines an empty block in ~1 ms at the start
of a chain and ~13 ms at 3,000 blocks on the 2 shared cores (it grows with the chain), so 50,000 blocks would take
many minutes here. `PROOFSWARM_LOG_PAGES_SCALE=20` runs the full size."""
SCALE = int(os.environ.get("PROOFSWARM_LOG_PAGES_SCALE", "1"))
PAGE, GAP = PAGE * SCALE, GAP * SCALE

MINE_AT_ONCE = 100
"""Blocks one `anvil_mine` makes: thousands at once outlast the client's 10 s request timeout on a loaded machine."""

COURT = CourtConfig(validator_bond=200 * TOKENS, verdict_fee=TOKENS, dispute_bond=20 * TOKENS,
                    wrong_verdict_slash=60 * TOKENS, non_voter_penalty=10 * TOKENS, silence_penalty=5 * TOKENS,
                    assigned_window_s=25, verdict_window_s=60, dispute_window_s=35, commit_period_s=15,
                    reveal_period_s=10, activation_delay_s=5, committee_size=3, fee_funding=100 * TOKENS)


class LogRanges:
    """Wraps the provider's transport: the (fromBlock, toBlock) of every eth_getLogs it sends (web3 keeps the
    provider's `make_request` bound in its middleware once a request was made)."""

    def __init__(self, w3, monkeypatch):
        self.w3, self.ranges = w3, []
        send = w3.provider._make_request

        def make_request(method, request_data):
            if method == "eth_getLogs":
                query = json.loads(request_data)["params"][0]
                self.ranges.append((self._number(query["fromBlock"]), self._number(query["toBlock"])))
            return send(method, request_data)

        monkeypatch.setattr(w3.provider, "_make_request", make_request)

    def _number(self, block) -> int:
        if isinstance(block, int):
            return block
        if block in ("latest", "pending", "safe", "finalized"):  # an open range: as long as the chain is
            return self.w3.eth.block_number
        return int(block, 16)

    @property
    def longest(self) -> int:
        return max(last - first + 1 for first, last in self.ranges)


def test_pages_cover_a_range_in_order_without_gaps():
    assert list(pages(5, 4, 3)) == []
    assert list(pages(0, 9, 4)) == [(0, 3), (4, 7), (8, 9)]
    assert list(pages(7, 7, 10_000)) == [(7, 7)]
    with pytest.raises(ValueError):
        list(pages(0, 1, 0))


def test_a_role_restarted_after_five_pages_of_blocks_catches_up_in_pages(chain, tmp_path, monkeypatch):
    w3, pool_id = chain.w3, chain.pool_id
    chain.ledger(0).token.mint(chain.accounts[3].address, 1_000_000 * TOKENS)
    before_pool = w3.eth.block_number
    court_pool = create_pool(chain.owner, pool_config(chain.accounts, validators=[], court=COURT,
                                                      challenge_window_s=600, reward_lock_s=1200))
    after_pool = w3.eth.block_number
    register_with_court(chain.validator, court_pool)
    old_work = chain.submit(0, b"\x01" * 32)
    cursor_file = tmp_path / "cursor.json"
    before = EventCursor(chain.owner.pool, ["WorkSubmitted"], cursor_file, start_block=chain.deployment.block)
    assert [e.work_id for e in before.poll()] == [old_work]
    before.commit()

    for _ in range(GAP // MINE_AT_ONCE):  # the role is down for a day
        chain.rpc("anvil_mine", [MINE_AT_ONCE, 1])  # a second apart: the chain's clock moves with its blocks
    assert w3.eth.block_number - chain.deployment.block > GAP
    new_work = chain.submit(1, b"\x02" * 32)
    head = w3.eth.block_number

    seen = LogRanges(w3, monkeypatch)
    owner, worker0, worker1, validator = (Ledger(w3, chain.deployment, chain.accounts[i], logs_page_blocks=PAGE)
                                          for i in (1, 4, 5, 3))
    restarted = EventCursor(owner.pool, ["WorkSubmitted"], cursor_file, start_block=chain.deployment.block,
                            batch_blocks=owner.logs.page_blocks)
    assert [e.work_id for e in restarted.poll()] == [new_work]  # the new event, and only it
    assert restarted.next_block == head + 1
    assert [w.work_id for w in works_of(worker0, worker0.address, pool_id)] == [old_work]
    assert [w.work_id for w in works_of(worker1, worker1.address, pool_id)] == [new_work]
    assert submitted_event(owner, old_work)["args"]["workId"] == old_work  # far behind the head
    assert before_pool < w3.eth.get_block(pool_created_in(owner, court_pool))["number"] <= after_pool
    assert challenges_of(worker0, worker0.address, pool_id) == []
    assert claimed_total(worker0, worker0.address) == 0
    status = validator_status(validator, court_pool)
    assert status["registered"] and status["verdicts"] == 0
    daemon = WorkerDaemon(worker0, WorkerOptions(pool_id=court_pool, kubo_api="/ip4/127.0.0.1/tcp/1",
                                                 work_dir=tmp_path / "worker"), producer=None, loader=None)
    assert daemon.court_has_judge()  # the registration GAP blocks back is found

    assert seen.ranges and seen.longest <= PAGE
    assert len(seen.ranges) > GAP // PAGE  # the history was read, in pages


def test_a_repeated_scan_reads_only_the_blocks_since_the_highest_read(chain, monkeypatch):
    worker = chain.worker(0)
    first = chain.submit(0, b"\x03" * 32)
    for _ in range(3):
        chain.rpc("anvil_mine", [MINE_AT_ONCE])
    reader = LogReader(chain.w3, page_blocks=MINE_AT_ONCE)
    event = worker.pool.contract.events.WorkSubmitted
    seen = LogRanges(chain.w3, monkeypatch)
    assert [bytes(e["args"]["workId"]) for e in reader.scan(event, {"poolId": chain.pool_id},
                                                            chain.deployment.block)] == [first]
    assert seen.longest <= MINE_AT_ONCE and len(seen.ranges) >= 3
    read_to = reader.highest_read(event, {"poolId": chain.pool_id}, chain.deployment.block)
    assert read_to == chain.w3.eth.block_number
    second = chain.submit(0, b"\x04" * 32)
    seen.ranges.clear()
    found = reader.scan(event, {"poolId": chain.pool_id}, chain.deployment.block)
    assert [bytes(e["args"]["workId"]) for e in found] == [first, second]
    assert min(f for f, _ in seen.ranges) > read_to - REORG_BLOCKS  # only the newest blocks read again
