"""ledger_client.chain.batches: range proofs verify for every run of every batch size, and fail when tampered;
a signed leaf recovers to its worker (the contract's side: contracts/test/WorkBatches.t.sol, bench.gas on anvil)."""

from __future__ import annotations

import pytest
from eth_account import Account
from eth_keys import keys
from eth_utils import keccak

from ledger_client.chain import batches


def _nodes(count: int) -> list[bytes]:
    return [keccak(i.to_bytes(32, "big")) for i in range(count)]


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 13, 32])
def test_every_run_of_a_batch_verifies(count: int) -> None:
    nodes = _nodes(count)
    top = batches.root(nodes)
    for lo in range(count):
        for n in range(1, count - lo + 1):
            proof = batches.range_proof(nodes, lo, n)
            assert batches.verify_range(nodes[lo:lo + n], lo, count, proof, top)


def test_a_tampered_run_or_proof_or_position_fails() -> None:
    nodes = _nodes(13)
    top = batches.root(nodes)
    proof = batches.range_proof(nodes, 3, 4)
    assert not batches.verify_range(nodes[3:7], 4, 13, proof, top)
    assert not batches.verify_range([nodes[3], nodes[5], nodes[4], nodes[6]], 3, 13, proof, top)
    bad = list(proof)
    bad[0] = keccak(bad[0])
    assert not batches.verify_range(nodes[3:7], 3, 13, bad, top)
    assert not batches.verify_range(nodes[3:7], 3, 13, proof + [b"\x00" * 32], top)
    with pytest.raises(ValueError):
        batches.range_proof(nodes, 12, 2)


def test_a_signed_leaf_recovers_to_its_worker() -> None:
    account = Account.create()
    domain = batches.domain_separator(31337, "0x" + "11" * 20)
    leaf = batches.sign_leaf(account, domain, 1, 0, 7, b"\x22" * 32, 3, 16)
    digest = batches.leaf_digest(domain, 1, 0, 7, account.address, b"\x22" * 32, 3, 16)
    vs = int.from_bytes(leaf.vs, "big")
    v, s = vs >> 255, vs & ((1 << 255) - 1)
    signature = keys.Signature(vrs=(v, int.from_bytes(leaf.r, "big"), s))
    assert signature.recover_public_key_from_msg_hash(digest).to_checksum_address() == account.address
    # another domain (chain or contract) gives another digest
    assert batches.leaf_digest(batches.domain_separator(1, "0x" + "11" * 20), 1, 0, 7, account.address,
                               b"\x22" * 32, 3, 16) != digest
