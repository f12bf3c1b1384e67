"""The ledger client against a real anvil: bindings, transactions, revert decoding, keys, connection errors."""

from __future__ import annotations

import threading

import pytest
import requests
from eth_account import Account

from ledger_client.chain import errors
from ledger_client.chain.keys import load_account, write_keystore
from ledger_client.chain.ledger import Ledger, connect, load_deployment, save_deployment
from ledger_client.chain.tx import TxSender, with_retries


def test_lifecycle_submit_attest_claim(chain):
    worker, validator = chain.worker(0), chain.validator
    digest = b"\xaa" * 32
    worker.pool.submit_work(chain.pool_id, 0, digest, 8)
    validator.pool.attest(digest)
    chain.rpc("evm_increaseTime", [chain.config.reward_lock_s])
    chain.rpc("evm_mine", [])
    before = worker.token.balance_of(worker.address)
    worker.pool.claim([digest])
    assert worker.token.balance_of(worker.address) - before == 8 * chain.config.reward_per_sample
    view = worker.pool.get_work(digest)
    assert view[0] == worker.address and view[5] == 4  # WorkStatus.Paid


def test_reverts_decode_to_named_exceptions(chain):
    worker = chain.worker(0)
    digest = b"\xbb" * 32
    worker.pool.submit_work(chain.pool_id, 0, digest, 1)
    with pytest.raises(errors.revert_class("DuplicateWork")) as exc:
        worker.pool.submit_work(chain.pool_id, 0, digest, 1)
    assert exc.value.args_dict == {"workId": digest}
    assert "submitWork: reverted with DuplicateWork(workId=0x" in str(exc.value)
    with pytest.raises(errors.revert_class("NotPoolTrainer")):
        worker.pool.publish_checkpoint(chain.pool_id, 1, b"\x01" * 32)
    with pytest.raises(errors.revert_class("UnknownPool")) as exc:
        worker.pool.get_pool(999)
    assert exc.value.args_dict == {"poolId": 999}


def test_custom_error_classes_are_shared_across_contracts():
    assert errors.revert_class("ZeroAmount") is errors.decode_revert(bytes.fromhex("1f2a2005")).__class__
    assert issubclass(errors.revert_class("InsufficientStake"), errors.ContractRevert)
    plain = errors.decode_revert(bytes.fromhex("08c379a0") + bytes(31) + b"\x20" + bytes(31) + b"\x03" + b"abc" + bytes(29))
    assert isinstance(plain, errors.UnknownRevert) and plain.args_dict == {"message": "abc"}


def test_concurrent_sends_from_one_key_never_collide(chain):
    worker = chain.worker(0)
    digests = [bytes([i]) * 32 for i in range(1, 13)]
    failures = []

    def submit(d):
        try:
            worker.pool.submit_work(chain.pool_id, 0, d, 1)
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            failures.append(exc)

    threads = [threading.Thread(target=submit, args=(d,)) for d in digests]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert all(worker.pool.get_work(d)[5] == 1 for d in digests)  # all Pending


def test_sender_resyncs_when_another_process_uses_the_key(chain):
    account = chain.accounts[4]
    first = Ledger(chain.w3, chain.deployment, account)
    first.pool.submit_work(chain.pool_id, 0, b"\x31" * 32, 1)  # caches the nonce
    other = TxSender(chain.w3, account)  # "another process"
    other.send(first.pool.function("submitWork", chain.pool_id, 0, b"\x32" * 32, 1))
    first.pool.submit_work(chain.pool_id, 0, b"\x33" * 32, 1)  # stale cached nonce → resync
    assert first.pool.get_work(b"\x33" * 32)[5] == 1


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
