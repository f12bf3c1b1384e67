"""Struct returns and arguments of the generated bindings are typed NamedTuples (real anvil)."""

from __future__ import annotations

from ledger_client.chain.bindings import MemberView, PoolParams, PoolView, WorkView


def test_get_pool_returns_a_typed_view(chain):
    v = chain.owner.pool.get_pool(chain.pool_id)
    assert isinstance(v, PoolView) and isinstance(v.params, PoolParams)
    assert v.owner == chain.accounts[1].address
    assert v.trainer == v.params.trainer == chain.config.trainer
    assert v.latest_step == 0 and v.reserved == 0 and v.budget == chain.config.funding
    assert v.params.reward_per_sample == chain.config.reward_per_sample
    assert v.params.challenge_window == chain.config.challenge_window_s
    assert v.params.validators == []  # the validator set is a mapping (isValidator), not returned
    assert v[3] == v.latest_step  # still a tuple for positional readers


def test_create_pool_takes_the_params_struct(chain):
    p = chain.owner.pool.get_pool(chain.pool_id).params._replace(validators=[chain.accounts[3].address],
                                                                   reward_lock=chain.config.reward_lock_s + 7)
    chain.owner.pool.create_pool(p)
    created = chain.owner.pool.get_pool(chain.owner.pool.pool_count())
    assert created.params == p._replace(validators=[])


def test_get_work_and_get_member_return_typed_views(chain):
    worker = chain.accounts[4].address
    nonce = chain.owner.pool.get_member(chain.pool_id, worker).next_nonce
    chain.worker(0).pool.submit_work(chain.pool_id, 0, nonce, b"\x42" * 32, 3)
    w = chain.owner.pool.get_work(chain.owner.pool.work_id_of(chain.pool_id, worker, nonce))
    assert isinstance(w, WorkView)
    assert (w.worker, w.pool_id, w.step, w.n_samples, w.status, w.nonce) == (worker, chain.pool_id, 0, 3, 1, nonce)
    assert w.reward == 3 * chain.config.reward_per_sample
    m = chain.owner.pool.get_member(chain.pool_id, worker)
    assert isinstance(m, MemberView)
    assert (m.member, m.next_nonce, m.open_works) == (True, nonce + 1, 1)
    assert m.required == chain.config.slash_amount
