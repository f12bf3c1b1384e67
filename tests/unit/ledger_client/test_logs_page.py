"""`logs_page`: a node that refuses a log range for a moment (geth 1.17 before its log index reaches the head it just
sealed) is asked again; one that keeps refusing is one LedgerError naming the range."""

from __future__ import annotations

import pytest
from web3.exceptions import Web3RPCError

from ledger_client.chain import logs
from ledger_client.chain.errors import LedgerError

GETH_LAG = "failed to retrieve log value pointer after last block 116: failed to retrieve log value pointer of " \
           "block 117: pebble: not found"


def refusing(times: int):
    calls = []

    def fetch():
        calls.append(1)
        if len(calls) <= times:
            raise Web3RPCError(GETH_LAG)
        return iter([{"blockNumber": 117}])
    return fetch, calls


def test_a_page_refused_while_the_node_indexes_its_head_is_asked_again(monkeypatch):
    monkeypatch.setattr(logs, "PAGE_RETRY_S", 0.0)
    fetch, calls = refusing(logs.PAGE_ATTEMPTS - 1)
    assert logs.logs_page(fetch, "eth_getLogs in blocks 100..117") == [{"blockNumber": 117}]
    assert len(calls) == logs.PAGE_ATTEMPTS


def test_a_page_the_node_keeps_refusing_is_one_error_naming_the_range(monkeypatch):
    monkeypatch.setattr(logs, "PAGE_RETRY_S", 0.0)
    fetch, calls = refusing(logs.PAGE_ATTEMPTS)
    with pytest.raises(LedgerError, match=r"eth_getLogs in blocks 100\.\.117 refused: .*pebble: not found"):
        logs.logs_page(fetch, "eth_getLogs in blocks 100..117")
    assert len(calls) == logs.PAGE_ATTEMPTS
