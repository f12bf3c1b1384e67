"""The ledger client against a real anvil: bindings, transactions, revert decoding, keys, connection errors."""

from __future__ import annotations

import threading

import pytest
import requests
from eth_account import Account

from ledger_client.chain import errors
from ledger_client.chain.keys import load_account, write_keystore
from ledger_client.chain.ledger import Ledger, connect, load_deployment, save_deployment
from ledger_client.chain.queries import claimed_works, rollout_digest_of
import ledger_client.chain.tx as tx_module
from ledger_client.chain.tx import TxSender, with_retries
from protocol.submission import work_id_of
from worker.account import deallocate_free, status


def test_lifecycle_submit_attest_claim(chain):
    worker, validator = chain.worker(0), chain.validator
    work_id = chain.submit(0, b"\xaa" * 32, 8)
    assert work_id == work_id_of(31337, chain.deployment.compute_pool, chain.pool_id, worker.address, 0)
    validator.pool.attest(work_id)
    locked = status(worker, chain.pool_id)  # what `worker status` tells a worker waiting out the reward lock
    submitted_at = worker.pool.get_work(work_id).submitted_at
    assert locked["rewards_owed"] == 8 * chain.config.reward_per_sample and locked["rewards_claimable"] == 0
    assert locked["rewards_claimable_at"] == submitted_at + chain.config.reward_lock_s
    chain.rpc("evm_increaseTime", [chain.config.reward_lock_s])
    chain.rpc("evm_mine", [])
    unlocked = status(worker, chain.pool_id)
    assert unlocked["rewards_claimable"] == 8 * chain.config.reward_per_sample
    assert unlocked["rewards_claimable_at"] is None  # nothing left waiting
    before = worker.token.balance_of(worker.address)
    worker.pool.claim([work_id])
    assert worker.token.balance_of(worker.address) - before == 8 * chain.config.reward_per_sample
    view = worker.pool.get_work(work_id)
    assert view.worker == worker.address and view.status == 4 and view.nonce == 0  # WorkStatus.Paid
    assert claimed_works(worker, worker.address) == {work_id}
    assert rollout_digest_of(worker, work_id) == b"\xaa" * 32


def test_reverts_decode_to_named_exceptions(chain):
    worker = chain.worker(0)
    chain.submit(0, b"\xbb" * 32, 1)
    with pytest.raises(errors.InvalidNonce) as exc:  # a nonce is used once (was: DuplicateWork)
        worker.pool.submit_work(chain.pool_id, 0, 0, b"\xbb" * 32, 1)
    assert exc.value.args_dict == {"nonce": 0, "expected": 1}
    assert "submitWork: reverted with InvalidNonce(nonce=0, expected=1)" in str(exc.value)
    with pytest.raises(errors.NotPoolTrainer):
        worker.pool.publish_checkpoint(chain.pool_id, 1, b"\x01" * 32)
    with pytest.raises(errors.UnknownPool) as exc:
        worker.pool.get_pool(999)
    assert exc.value.args_dict == {"poolId": 999}


def test_custom_error_classes_are_shared_across_contracts():
    assert type(errors.decode_revert(bytes.fromhex("1f2a2005"))) is errors.ZeroAmount  # one class, three contracts
    assert issubclass(errors.InsufficientAllocation, errors.ContractRevert)
    plain = errors.decode_revert(bytes.fromhex("08c379a0") + bytes(31) + b"\x20" + bytes(31) + b"\x03" + b"abc" + bytes(29))
    assert isinstance(plain, errors.UnknownRevert) and plain.args_dict == {"message": "abc"}


def test_concurrent_sends_from_one_key_never_collide(chain):
    # Submissions from one worker are sequential by rule now (nonces), so the concurrent sends are allocations.
    worker = chain.worker(0)
    worker.ensure_stake(12)
    before = worker.pool.get_member(chain.pool_id, worker.address).allocation
    failures = []

    def allocate():
        try:
            worker.pool.allocate(chain.pool_id, 1)
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            failures.append(exc)

    threads = [threading.Thread(target=allocate) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert worker.pool.get_member(chain.pool_id, worker.address).allocation == before + 12


def test_sender_resyncs_when_another_process_uses_the_key(chain):
    account = chain.accounts[4]
    first = Ledger(chain.w3, chain.deployment, account)
    first.ensure_allocation(chain.pool_id, 3 * chain.config.slash_amount)
    first.pool.submit_work(chain.pool_id, 0, 0, b"\x31" * 32, 1)  # caches the nonce
    other = TxSender(chain.w3, account)  # "another process"
    other.send(first.pool.function("submitWork", chain.pool_id, 0, 1, b"\x32" * 32, 1))
    first.pool.submit_work(chain.pool_id, 0, 2, b"\x33" * 32, 1)  # stale cached nonce → resync
    assert first.pool.get_work(first.pool.work_id_of(chain.pool_id, account.address, 2)).status == 1


def test_a_sender_quotes_fees_as_web3_would_and_reuses_the_quote_briefly(chain, monkeypatch):
    """Fee fields are the node's priority fee plus twice the latest base fee (web3's default), asked for once per
    FEE_QUOTE_TTL_S rather than before every transaction; a quote past its time is asked for again."""
    account = chain.accounts[5]
    Ledger(chain.w3, chain.deployment, account).ensure_allocation(chain.pool_id, 3 * chain.config.slash_amount)
    ledger = Ledger(chain.w3, chain.deployment, account)  # a sender that has quoted nothing yet
    asked: list[int] = []  # the base fee of every latest block asked for
    real_get_block = type(chain.w3.eth).get_block

    def get_block(eth, ident, *args, **kwargs):
        block = real_get_block(eth, ident, *args, **kwargs)
        if ident == "latest":
            asked.append(block["baseFeePerGas"])
        return block

    monkeypatch.setattr(type(chain.w3.eth), "get_block", get_block)

    def sent_fees(nonce: int) -> tuple[int, int]:
        receipt = ledger.pool.submit_work(chain.pool_id, 0, nonce, bytes([0x40 + nonce]) * 32, 1)
        tx = chain.w3.eth.get_transaction(receipt["transactionHash"])
        return tx["maxPriorityFeePerGas"], tx["maxFeePerGas"]

    monkeypatch.setattr(tx_module, "FEE_QUOTE_TTL_S", 3600.0)
    priority, max_fee = sent_fees(0)
    assert len(asked) == 1 and priority == chain.w3.eth.max_priority_fee and max_fee == priority + 2 * asked[0]
    assert sent_fees(1) == (priority, max_fee) and len(asked) == 1  # one quote for both
    monkeypatch.setattr(tx_module, "FEE_QUOTE_TTL_S", 0.0)
    priority, max_fee = sent_fees(2)
    assert len(asked) == 2 and max_fee == priority + 2 * asked[1]  # the quote had expired: asked again


def test_insufficient_gas_funds_is_one_line(chain):
    poor = Account.create()
    ledger = Ledger(chain.w3, chain.deployment, poor)
    with pytest.raises(errors.LedgerError) as exc:
        ledger.pool.join_pool(chain.pool_id)
    assert "\n" not in str(exc.value)


def test_keystore_roundtrip_and_wrong_password(tmp_path):
    account = Account.create()
    path = write_keystore(account, tmp_path / "key.json", "s3cret")
    (tmp_path / "pw").write_text("s3cret\n")
    assert load_account(keystore=path, password_file=tmp_path / "pw").address == account.address
    (tmp_path / "bad").write_text("nope")
    with pytest.raises(errors.KeyLoadError, match="wrong password"):
        load_account(keystore=path, password_file=tmp_path / "bad")
    with pytest.raises(errors.KeyLoadError, match="does not exist"):
        load_account(keystore=tmp_path / "missing.json", password_file=tmp_path / "pw")
    with pytest.raises(errors.KeyLoadError, match="not a valid"):
        load_account(private_key="0x1234")


def test_connect_refuses_wrong_chain_and_unreachable(anvil):
    with pytest.raises(errors.WrongChain, match="serves chain id 31337, expected 1"):
        connect(anvil.rpc_url, expected_chain_id=1)
    with pytest.raises(errors.RpcUnreachable, match="cannot reach"):
        connect("http://127.0.0.1:1", timeout=1)


def test_deployments_file_is_keyed_by_chain_and_checked(chain, tmp_path):
    path = tmp_path / "deployments.json"
    save_deployment(path, chain.deployment)
    assert load_deployment(path, 31337) == chain.deployment
    with pytest.raises(errors.NotDeployed, match="no deployment for chain id 5"):
        load_deployment(path, 5)
    bad = chain.deployment.model_copy(update={"compute_pool": chain.accounts[9].address})
    with pytest.raises(errors.NotDeployed, match="no compute pool contract"):
        Ledger(chain.w3, bad)


def test_retries_transient_errors_then_gives_up():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise requests.ConnectionError("boom")
        return 42

    assert with_retries(flaky, base_delay=0.001) == 42
    with pytest.raises(errors.RpcUnreachable):
        with_retries(lambda: (_ for _ in ()).throw(requests.Timeout()), attempts=2, base_delay=0.001)


def test_ensure_stake_refuses_without_balance(chain):
    poor = chain.ledger(7)  # has ETH for gas but no stake tokens
    with pytest.raises(errors.LedgerError, match="needs"):
        poor.ensure_stake(chain.config.min_stake)
    assert poor.stake.bonded_of(poor.address) == 0
    with pytest.raises(errors.LedgerError, match="needs"):
        poor.ensure_allocation(chain.pool_id, chain.config.min_stake)
    assert poor.pool.get_member(chain.pool_id, poor.address).allocation == 0


def test_allocation_follows_open_work_and_a_slash_is_topped_up(chain):
    """Stake is bonded, then allocated per pool; submitWork needs max(minStake, (open+1) × slash), a
    challenge takes the slash from the allocation, and the worker's top-up restores what the next
    submission needs."""
    worker, cfg = chain.worker(0), chain.config
    assert worker.required_allocation(chain.pool_id, cfg.min_stake, cfg.slash_amount) == cfg.min_stake
    first = chain.submit(0, b"\x51" * 32)
    second = chain.submit(0, b"\x52" * 32)
    member = worker.pool.get_member(chain.pool_id, worker.address)
    assert (member.open_works, member.allocation, member.required) == (2, 2 * cfg.slash_amount, 2 * cfg.slash_amount)
    with pytest.raises(errors.InsufficientAllocation):
        worker.pool.deallocate(chain.pool_id, 1)
    with pytest.raises(errors.InsufficientAllocation):  # a third open work needs 3 × slash
        worker.pool.submit_work(chain.pool_id, 0, 2, b"\x53" * 32, 8)
    chain.validator.pool.challenge(first, 3, b"\x99" * 32)
    member = worker.pool.get_member(chain.pool_id, worker.address)
    assert (member.open_works, member.allocation) == (1, cfg.slash_amount)
    added = worker.ensure_allocation(chain.pool_id, worker.required_allocation(chain.pool_id, cfg.min_stake,
                                                                               cfg.slash_amount))
    assert added == cfg.min_stake - cfg.slash_amount
    chain.validator.pool.attest(second)  # accepted but unpaid work stays open
    assert worker.pool.get_member(chain.pool_id, worker.address).required == cfg.slash_amount
    chain.rpc("evm_increaseTime", [cfg.reward_lock_s])
    chain.rpc("evm_mine", [])
    worker.pool.claim([second])
    assert deallocate_free(worker, chain.pool_id) == cfg.min_stake  # nothing open: all of it comes back
    member = worker.pool.get_member(chain.pool_id, worker.address)
    assert (member.open_works, member.allocation) == (0, 0)
    assert worker.stake.bonded_of(worker.address) == cfg.min_stake


def test_the_spot_check_block_is_one_request_and_follows_a_reorg_that_moved_the_submission(chain):
    """spot_check_block with the event's block hash as first seen asks for block B + 1 only; when a reorg moved the
    submission to a later block, B + 1's parent is no longer that block and the event is looked up again."""
    from ledger_client.chain.queries import spot_check_block, submitted_event

    work_id = chain.submit(0, b"\x61" * 32)
    event = submitted_event(chain.owner, work_id)
    b, seen_hash = event["blockNumber"], bytes(event["blockHash"])
    assert spot_check_block(chain.owner, work_id, 0, b, seen_hash, head=b) is None  # B + 1 is not there yet
    chain.rpc("anvil_mine", [1])
    child = bytes(chain.w3.eth.get_block(b + 1)["hash"])
    assert spot_check_block(chain.owner, work_id, 0, b, seen_hash, head=b + 1) == (b, child)
    raw = chain.w3.eth.get_raw_transaction(event["transactionHash"])
    assert "error" not in chain.rpc("anvil_reorg", [2, [[raw.to_0x_hex(), 1]]])  # the submission one block later
    chain.rpc("anvil_mine", [1])
    assert submitted_event(chain.owner, work_id)["blockNumber"] == b + 1
    moved = (b + 1, bytes(chain.w3.eth.get_block(b + 2)["hash"]))
    assert spot_check_block(chain.owner, work_id, 0, b, seen_hash, head=chain.w3.eth.block_number) == moved


def test_transactions_are_signed_by_libsecp256k1():
    # the pure-Python backend took ~4 ms a signature: one per submitted file for the worker and one for the validator
    from eth_keys.backends import get_backend
    from eth_keys.backends.coincurve import CoinCurveECCBackend

    assert isinstance(get_backend(), CoinCurveECCBackend)
