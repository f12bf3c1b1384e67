"""ledger_client.chain.batches: range proofs verify for every range of every tree size, and fail when tampered; a
signed run recovers to its worker, its leaves prove into it and its node into a batch (the contract's side:
contracts/test/WorkBatches.t.sol, tests/integration/test_work_batches.py and bench.gas on anvil)."""

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


def _recover(digest: bytes, r: bytes, vs: bytes) -> str:
    v_s = int.from_bytes(vs, "big")
    signature = keys.Signature(vrs=(v_s >> 255, int.from_bytes(r, "big"), v_s & ((1 << 255) - 1)))
    return signature.recover_public_key_from_msg_hash(digest).to_checksum_address()


def _leaves(n: int, tag: int = 0) -> list[batches.LeafBody]:
    return [batches.LeafBody(bytes([tag, i]) * 16, 3, i % 4 + 1) for i in range(n)]


def test_a_signed_run_recovers_to_its_worker_in_its_domain_only() -> None:
    account = Account.create()
    domain = batches.domain_separator(31337, "0x" + "11" * 20)
    run = batches.sign_run(account, domain, 1, 0, 7, _leaves(5))
    assert run.digest == batches.run_digest(domain, 1, 0, 7, 5, run.leaves_root)
    assert _recover(run.digest, run.r, run.vs) == account.address
    assert run.signed() == (7, 5, run.leaves_root, run.r, run.vs)
    # another chain, contract, pool, epoch, first counter, count or root gives another digest
    others = [batches.run_digest(batches.domain_separator(1, "0x" + "11" * 20), 1, 0, 7, 5, run.leaves_root),
              batches.run_digest(batches.domain_separator(31337, "0x" + "12" * 20), 1, 0, 7, 5, run.leaves_root),
              batches.run_digest(domain, 2, 0, 7, 5, run.leaves_root), batches.run_digest(domain, 1, 1, 7, 5, run.leaves_root),
              batches.run_digest(domain, 1, 0, 8, 5, run.leaves_root), batches.run_digest(domain, 1, 0, 7, 4, run.leaves_root),
              batches.run_digest(domain, 1, 0, 7, 5, keccak(run.leaves_root))]
    assert run.digest not in others and len(set(others)) == len(others)


def test_a_runs_leaves_prove_into_its_root_and_its_node_into_a_batch() -> None:
    account = Account.create()
    domain = batches.domain_separator(31337, "0x" + "11" * 20)
    runs = [batches.sign_run(account, domain, 1, 2, first, _leaves(n, first)) for first, n in ((0, 13), (13, 1), (14, 6))]
    nodes, ref = batches.batch(runs, b"\x44" * 32)
    assert ref == (1, 2, 3, batches.root(nodes), b"\x44" * 32)
    for at, run in enumerate(runs):
        assert batches.verify_range([run.node()], at, 3, batches.range_proof(nodes, at, 1), ref[3])
        hashes = run.hashes()
        first, leaves, proof = run.claim_args(run.first_counter + 1, len(hashes) - 1) if len(hashes) > 1 else \
            run.claim_args(run.first_counter, 1)
        lo = first - run.first_counter
        assert [batches.leaf_hash(batches.LeafBody(*leaf)) for leaf in leaves] == hashes[lo:]
        assert batches.verify_range(hashes[lo:], lo, len(hashes), proof, run.leaves_root)
    signed, leaf, proof = runs[0].leaf(5)
    assert signed == runs[0].signed() and leaf == tuple(runs[0].leaves[5])
    assert batches.verify_range([batches.leaf_hash(batches.LeafBody(*leaf))], 5, 13, proof, runs[0].leaves_root)
    # a leaf with other samples no longer proves into the run
    forged = batches.leaf_hash(runs[0].leaves[5]._replace(samples=99))
    assert not batches.verify_range([forged], 5, 13, proof, runs[0].leaves_root)
    with pytest.raises(ValueError):
        runs[0].leaf(13)


def test_runs_and_batches_outside_the_rules_are_refused() -> None:
    account = Account.create()
    domain = batches.domain_separator(31337, "0x" + "11" * 20)
    with pytest.raises(ValueError):
        batches.sign_run(account, domain, 1, 0, 0, [])
    with pytest.raises(ValueError):
        batches.sign_run(account, domain, 1, 0, 0, _leaves(1) * (batches.MAX_LEAVES + 1))
    a = batches.sign_run(account, domain, 1, 0, 0, _leaves(2))
    b = batches.sign_run(account, domain, 1, 1, 0, _leaves(2))
    with pytest.raises(ValueError):
        batches.batch([a, b], b"\x01" * 32)
    with pytest.raises(ValueError):
        batches.batch([], b"\x01" * 32)
