"""protocol.batchlist, the batch list a posted batch names (docs/protocol.md R3.8): canonical bytes that decode back to
the same list, and hostile bytes refused with one clear `BatchListError` before any unbounded read; a list rebuilds its
runs and batch (ledger_client.chain.batches.check_posted) only when nobody changed a signed field."""

from __future__ import annotations

import struct

import pytest
from eth_account import Account

from ledger_client.chain import batches
from protocol.batchlist import (
    MAX_LIST_BYTES,
    BatchList,
    BatchListError,
    ListedLeaf,
    decode_batch_list,
    encode_batch_list,
)

DOMAIN = batches.domain_separator(31337, "0x" + "11" * 20)
WORKERS = [Account.from_key(bytes([n + 1]) * 32) for n in range(2)]


def _runs():
    leaves = [batches.LeafBody(bytes([c]) * 32, 3, 16) for c in range(5)]
    return [batches.sign_run(WORKERS[0], DOMAIN, 7, 2, 0, leaves[:3]),
            batches.sign_run(WORKERS[1], DOMAIN, 7, 2, 4, leaves[3:])]


def _list(attempt: int = 0) -> BatchList:
    return BatchList(7, 2, tuple(batches.listed(r) for r in _runs()), attempt)


def test_a_list_round_trips_canonically_and_rebuilds_its_posted_batch():
    bl = _list()
    data = encode_batch_list(bl)
    assert decode_batch_list(data) == bl and encode_batch_list(decode_batch_list(data)) == data
    assert len(data) == 47 + 2 * 92 + 5 * 44  # header, two run headers, five leaves
    _, ref = batches.batch(_runs(), b"\x09" * 32)
    assert batches.check_posted(decode_batch_list(data), DOMAIN, ref) == _runs()
    assert encode_batch_list(_list(attempt=1)) != data  # a second posting of the same runs is another batch


@pytest.mark.parametrize("cut", [0, 10, 46, 47 + 50, 47 + 92 + 20, -1])
def test_truncated_bytes_are_refused(cut):
    data = encode_batch_list(_list())
    with pytest.raises(BatchListError, match="shorter|ends inside"):
        decode_batch_list(data[:cut])


def test_hostile_headers_are_refused_before_reading_on():
    data = bytearray(encode_batch_list(_list()))
    cases = {"not a batch list": lambda d: d.__setitem__(slice(0, 4), b"XXXX"),
             "version 9": lambda d: d.__setitem__(4, 9),
             "declares 0 runs": lambda d: d.__setitem__(slice(45, 47), b"\x00\x00"),
             "declares 1025 runs": lambda d: d.__setitem__(slice(45, 47), struct.pack(">H", 1025)),
             "declares 4097 leaves": lambda d: d.__setitem__(slice(47 + 24, 47 + 28), struct.pack(">I", 4097)),
             "overflow 32 bits": lambda d: d.__setitem__(slice(47 + 20, 47 + 24), struct.pack(">I", 2**32 - 2))}
    for message, edit in cases.items():
        bad = bytearray(data)
        edit(bad)
        with pytest.raises(BatchListError, match=message):
            decode_batch_list(bytes(bad))
    with pytest.raises(BatchListError, match="bytes after"):
        decode_batch_list(bytes(data) + b"\x00")
    with pytest.raises(BatchListError, match="exceeds"):
        decode_batch_list(bytes(MAX_LIST_BYTES + 1))


def test_a_list_whose_signed_fields_were_changed_does_not_rebuild_its_batch():
    _, ref = batches.batch(_runs(), b"\x09" * 32)
    bl = _list()
    run = bl.runs[0]
    forged = run._replace(leaves=(ListedLeaf(b"\xee" * 32, 3, 16),) + run.leaves[1:])
    with pytest.raises(batches.InconsistentList, match="not signed by its listed worker"):
        batches.check_posted(bl._replace(runs=(forged,) + bl.runs[1:]), DOMAIN, ref)
    other = run._replace(worker=WORKERS[1].address)  # a run claimed for another worker
    with pytest.raises(batches.InconsistentList, match="not signed"):
        batches.check_posted(bl._replace(runs=(other,) + bl.runs[1:]), DOMAIN, ref)
    with pytest.raises(batches.InconsistentList, match="runs do not hash"):
        batches.check_posted(bl._replace(runs=bl.runs[::-1]), DOMAIN, ref)
    with pytest.raises(batches.InconsistentList, match="holds 1 runs"):
        batches.check_posted(bl._replace(runs=bl.runs[:1]), DOMAIN, ref)
    with pytest.raises(batches.InconsistentList, match="epoch 3"):
        batches.check_posted(bl._replace(epoch=3), DOMAIN, ref)
    high_s = run._replace(vs=(batches.SECP256K1_HALF_N + 1).to_bytes(32, "big"))
    with pytest.raises(batches.InconsistentList):
        batches.check_posted(bl._replace(runs=(high_s,) + bl.runs[1:]), DOMAIN, ref)
