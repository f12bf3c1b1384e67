"""Batched settlement on a real anvil (docs/protocol.md R3.7–R3.12): leaves signed and trees built by
ledger_client.chain.batches are what contracts/src/WorkBatches.sol verifies — the digest, a batch, claims by range
proof, a challenge; the contract's own rules are held by contracts/test/WorkBatches.t.sol."""

from __future__ import annotations

import pytest

from deploy.contracts import deploy_slasher_beside
from ledger_client.chain import batches, contract_errors
from ledger_client.chain.bindings import WorkBatches
from tests.support.conftest_chain import TOKENS

EPOCH, MAX_LEAVES = 3600, 16


@pytest.fixture
def pool(chain):
    """WorkBatches beside the chain's pool; workers 0 and 1 bonded there; epoch 1 (their bonds' first) opened."""
    address = deploy_slasher_beside(chain.w3, chain.accounts[0], chain.deployment, "WorkBatches",
                                    chain.deployment.compute_pool)
    owner = WorkBatches(chain.w3, address, chain.owner.sender)
    bond = chain.config.slash_amount * MAX_LEAVES * 3  # R1.25: a 60 s window in a 1 h epoch
    owner.configure(chain.pool_id, (EPOCH, MAX_LEAVES, bond))
    chain.owner.token.approve(address, 1_000 * TOKENS)
    owner.fund(chain.pool_id, 1_000 * TOKENS)
    for n in (0, 1):
        w = chain.worker(n)
        w.token.approve(w.stake.address, bond)
        w.stake.bond(bond)
        owner.with_sender(w.sender).lock_bond(chain.pool_id)
    chain.rpc("evm_increaseTime", [EPOCH])
    chain.rpc("evm_mine", [])
    owner.open_epoch(chain.pool_id)
    return owner


def _batch(chain, wb, runs: list[tuple[int, int]], tag: int):
    """Worker n's leaves 0..k − 1 for each (n, k) in `runs`, in that order; the batch's leaves, nodes and ref."""
    domain = batches.domain_separator(chain.w3.eth.chain_id, wb.address)
    leaves = [batches.sign_leaf(chain.accounts[4 + n], domain, chain.pool_id, 1, c, bytes([tag, n, c]) + b"\x01" * 29,
                                0, 4) for n, k in runs for c in range(k)]
    nodes = [batches.node(domain, leaf) for leaf in leaves]
    return leaves, nodes, (chain.pool_id, 1, len(nodes), batches.root(nodes), bytes([tag]) * 32)


def test_python_leaves_batches_and_range_proofs_are_what_the_contract_verifies(chain, pool):
    leaves, nodes, ref = _batch(chain, pool, [(0, 3), (1, 2)], 1)
    one = leaves[0]
    assert bytes(pool.leaf_digest(chain.pool_id, 1, 0, one.worker, one.rollout_digest, 0, 4)) == batches.leaf_digest(
        batches.domain_separator(chain.w3.eth.chain_id, pool.address), chain.pool_id, 1, 0, one.worker,
        one.rollout_digest, 0, 4)
    pool.with_sender(chain.ledger(6).sender).post_batch(ref)  # anyone posts
    w0, w1 = (pool.with_sender(chain.worker(n).sender) for n in (0, 1))
    with pytest.raises(contract_errors.WindowOpen):
        w0.claim(ref, 0, 0, [leaf.body() for leaf in leaves[:3]], batches.range_proof(nodes, 0, 3))
    chain.rpc("evm_increaseTime", [chain.config.challenge_window_s + 1])
    chain.rpc("evm_mine", [])
    before = chain.owner.token.balance_of(chain.worker(1).address)
    w1.claim(ref, 0, 3, [leaf.body() for leaf in leaves[3:]], batches.range_proof(nodes, 3, 2))
    assert chain.owner.token.balance_of(chain.worker(1).address) - before == 2 * 4 * chain.config.reward_per_sample
    w0.claim(ref, 0, 0, [leaf.body() for leaf in leaves[:2]], batches.range_proof(nodes, 0, 2))
    with pytest.raises(contract_errors.NotNextCounter):  # a counter is paid once
        w0.claim(ref, 1, 1, [leaves[1].body()], batches.range_proof(nodes, 1, 1))
    with pytest.raises(contract_errors.BadSignature):  # worker 1's leaf is not worker 0's
        w0.claim(ref, 2, 3, [leaves[3].body()], batches.range_proof(nodes, 3, 1))
    w0.claim(ref, 2, 2, [leaves[2].body()], batches.range_proof(nodes, 2, 1))
    assert pool.budget(chain.pool_id) == 1_000 * TOKENS - 5 * 4 * chain.config.reward_per_sample


def test_a_validators_challenge_of_a_python_leaf_voids_it_and_slashes(chain, pool):
    leaves, nodes, ref = _batch(chain, pool, [(0, 13)], 2)  # 13 leaves: an odd, padded tree
    pool.post_batch(ref)
    v = pool.with_sender(chain.validator.sender)
    v.challenge(ref, leaves[12].worker, 12, 12, leaves[12].body(), batches.range_proof(nodes, 12, 1), 3, b"\x07" * 32)
    assert pool.is_void(chain.pool_id, leaves[12].worker, 1, 12)
    assert pool.get_bond(chain.pool_id, leaves[12].worker).locked == \
        chain.config.slash_amount * MAX_LEAVES * 3 - chain.config.slash_amount
