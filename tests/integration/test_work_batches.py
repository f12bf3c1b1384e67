"""Batched settlement on a real anvil (docs/protocol.md R3.7–R3.12): runs signed and trees built by
ledger_client.chain.batches are what contracts/src/WorkBatches.sol verifies — the digest, a batch, claims by range
proof, a challenge, a duplicate-counter proof; the contract's own rules are held by contracts/test/WorkBatches.t.sol."""

from __future__ import annotations

import pytest

from ledger_client.chain import batches, contract_errors
from ledger_client.chain.bindings import WorkBatches
from tests.support.conftest_chain import TOKENS

EPOCH, MAX_LEAVES = 3600, 16


@pytest.fixture
def pool(chain):
    """The deployment's WorkBatches, configured for the chain's pool; workers 0 and 1 bonded there; epoch 1 (their
    bonds' first) opened."""
    address = chain.deployment.work_batches
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


def _batch(chain, wb, runs: list[tuple[int, int, int]], tag: int):
    """Worker n's run of its leaves `first`..`first + k − 1` for each (n, first, k) in `runs`, in that order, 4 samples
    each; the signed runs, their nodes and the batch's ref."""
    domain = batches.domain_separator(chain.w3.eth.chain_id, wb.address)
    signed = [batches.sign_run(chain.accounts[4 + n], domain, chain.pool_id, 1, first,
                               [batches.LeafBody(bytes([tag, n, c]) + b"\x01" * 29, 0, 4) for c in range(first, first + k)])
              for n, first, k in runs]
    nodes, ref = batches.batch(signed, bytes([tag]) * 32)
    return signed, nodes, ref


def _claim(wb, runs, nodes, ref, at: int, first: int, n: int):
    return wb.claim(ref, at, batches.range_proof(nodes, at, 1), runs[at].signed(), *runs[at].claim_args(first, n))


def test_python_runs_batches_and_range_proofs_are_what_the_contract_verifies(chain, pool):
    runs, nodes, ref = _batch(chain, pool, [(0, 0, 3), (1, 0, 2), (0, 3, 2)], 1)
    one = runs[0]
    assert bytes(pool.run_digest(chain.pool_id, 1, 0, 3, one.leaves_root)) == one.digest
    assert bytes(pool.leaf_hash(one.leaves[0])) == batches.leaf_hash(one.leaves[0])
    pool.with_sender(chain.ledger(6).sender).post_batch(ref)  # anyone posts
    w0, w1 = (pool.with_sender(chain.worker(n).sender) for n in (0, 1))
    with pytest.raises(contract_errors.WindowOpen):
        _claim(w0, runs, nodes, ref, 0, 0, 3)
    chain.rpc("evm_increaseTime", [chain.config.challenge_window_s + 1])
    chain.rpc("evm_mine", [])
    before = chain.owner.token.balance_of(chain.worker(1).address)
    _claim(w1, runs, nodes, ref, 1, 0, 2)
    assert chain.owner.token.balance_of(chain.worker(1).address) - before == 2 * 4 * chain.config.reward_per_sample
    _claim(w0, runs, nodes, ref, 0, 0, 2)  # a part of its run
    with pytest.raises(contract_errors.NotNextCounter):  # a counter is paid once
        _claim(w0, runs, nodes, ref, 0, 1, 1)
    with pytest.raises(contract_errors.BadSignature):  # worker 1's run is not worker 0's
        _claim(w0, runs, nodes, ref, 1, 0, 1)
    _claim(w0, runs, nodes, ref, 0, 2, 1)
    _claim(w0, runs, nodes, ref, 2, 3, 2)  # its second run in the batch
    assert pool.budget(chain.pool_id) == 1_000 * TOKENS - 7 * 4 * chain.config.reward_per_sample


def test_a_validators_challenge_of_a_python_leaf_voids_it_and_slashes_the_runs_signer(chain, pool):
    runs, nodes, ref = _batch(chain, pool, [(1, 0, 2), (0, 0, 13)], 2)  # a run of 13 leaves: an odd, padded tree
    pool.post_batch(ref)
    v = pool.with_sender(chain.validator.sender)
    worker = runs[1].worker
    v.challenge(ref, 1, batches.range_proof(nodes, 1, 1), worker, 12, runs[1].leaf(12), 3, b"\x07" * 32)
    assert pool.is_void(chain.pool_id, worker, 1, 12)
    assert pool.get_bond(chain.pool_id, worker).locked == \
        chain.config.slash_amount * MAX_LEAVES * 3 - chain.config.slash_amount


def test_two_python_runs_that_disagree_on_a_counter_are_a_fraud_proof(chain, pool):
    domain = batches.domain_separator(chain.w3.eth.chain_id, pool.address)
    account = chain.accounts[4]
    leaves = [batches.LeafBody(bytes([9, c]) * 16, 0, 4) for c in range(6)]
    a = batches.sign_run(account, domain, chain.pool_id, 1, 0, leaves[:4])  # counters 0..3
    b = batches.sign_run(account, domain, chain.pool_id, 1, 2, [leaves[2]._replace(samples=5)] + leaves[3:])  # 2..5
    prover = pool.with_sender(chain.ledger(6).sender)
    with pytest.raises(contract_errors.NotDuplicate):  # counter 3: the runs agree
        prover.prove_duplicate(chain.pool_id, account.address, 1, 3, a.leaf(3), b.leaf(3))
    prover.prove_duplicate(chain.pool_id, account.address, 1, 2, a.leaf(2), b.leaf(2))
    assert pool.is_void(chain.pool_id, account.address, 1, 2)
