"""protocol.hashchain: a chain's links from its secret as ForcedErrors checks them (docs/protocol.md R9.25), the
secret a daemon derives from its key, and its recovery from the chain's on-chain state after a restart."""

from __future__ import annotations

from typing import NamedTuple

from eth_utils import keccak

from protocol.hashchain import Role, chain_secret, drawn, epoch_of, hashes, link, recover_secret

KEY = bytes(range(32))
WHERE = (31337, "0x" + "11" * 20, 7)


class Chain(NamedTuple):  # `IForcedErrors.Chain`
    last: bytes
    first_epoch: int
    last_epoch: int
    end_epoch: int
    locked: int = 0


def test_each_link_opens_the_one_before_and_the_head_is_the_chain_before_its_first_epoch():
    s = chain_secret(KEY, *WHERE, Role.VALIDATOR, 3)
    end, length = 3 + 16, 16
    head = hashes(s, length)
    assert link(s, end, 3) == head  # committed in epoch 3: it covers 4..19
    for e in range(4, end + 1):
        assert keccak(link(s, end, e)) == link(s, end, e - 1)
    assert link(s, end, end) == s


def test_secrets_differ_by_label_role_pool_and_key():
    base = chain_secret(KEY, *WHERE, Role.VALIDATOR, 3)
    assert len({base, chain_secret(KEY, *WHERE, Role.VALIDATOR, 4), chain_secret(KEY, *WHERE, Role.WORKER, 3),
                chain_secret(KEY, 31337, "0x" + "11" * 20, 8, Role.VALIDATOR, 3),
                chain_secret(bytes(32), *WHERE, Role.VALIDATOR, 3)}) == 5
    assert chain_secret(KEY, *WHERE, Role.VALIDATOR, 3) == base  # a restart derives the same


def test_a_restart_recovers_the_secret_from_the_chain_on_chain_whenever_its_commit_was_mined():
    for decided, mined in ((5, 5), (5, 6), (5, 9)):  # the commit's transaction waited up to 4 epochs
        s = chain_secret(KEY, *WHERE, Role.VALIDATOR, decided)
        end = mined + 8
        before = Chain(hashes(s, 8), mined + 1, mined, end)
        assert recover_secret(KEY, *WHERE, Role.VALIDATOR, before) == s
        revealed = Chain(link(s, end, mined + 3), mined + 1, mined + 3, end)  # after three reveals
        assert recover_secret(KEY, *WHERE, Role.VALIDATOR, revealed) == s
        assert recover_secret(bytes(32), *WHERE, Role.VALIDATOR, revealed) is None  # another key's chain
    assert recover_secret(KEY, *WHERE, Role.VALIDATOR, Chain(bytes(32), 0, 0, 0)) is None  # no chain


def test_the_draw_is_a_rate_of_2_256_and_epochs_count_from_the_configure():
    beacon = keccak(b"beacon")
    assert not drawn(b"\x01" * 32, beacon, b"\x02" * 32, 0) and drawn(b"\x01" * 32, beacon, b"\x02" * 32, 10_000)
    hits = sum(drawn(keccak(i.to_bytes(32, "big")), beacon, b"\x02" * 32, 2_500) for i in range(2_000))
    assert 400 < hits < 600  # 25 %: ~500 ± 4.5 σ
    assert [epoch_of(100, 60, t) for t in (0, 100, 101, 159, 160, 221)] == [0, 0, 0, 0, 1, 2]


def test_the_draw_mixes_the_epochs_beacon_as_the_contract_does():
    """The vector contracts/test/ForcedErrors.t.sol (`test_beacon_decidesTheDraws`) checks on the contract's `drawn`:
    keccak(link ‖ beacon ‖ workId) — the same link and file fall at 74.99 % of 2^256 under one beacon and at 35.54 %
    under the fallback (zero). Random inputs against the deployed contract: tests/integration/test_audit_chain.py."""
    link_, beacon, work = keccak(b"link"), keccak(b"beacon"), keccak(b"work")
    assert keccak(link_ + beacon + work).hex() == "bff4e88bca74ee04b97626e575c2ff9be50ae84bbbd9e3dbe379ecb0814eb9c6"
    assert drawn(link_, beacon, work, 7_499) and not drawn(link_, beacon, work, 7_498)
    assert drawn(link_, bytes(32), work, 3_554) and not drawn(link_, bytes(32), work, 3_553)
    # one beacon bit flipped moves the draw as far as any other beacon: ~half of 200 files change side at 50 %
    other = bytes([beacon[0] ^ 1]) + beacon[1:]
    works = [keccak(i.to_bytes(32, "big")) for i in range(200)]
    changed = sum(drawn(link_, beacon, w, 5_000) != drawn(link_, other, w, 5_000) for w in works)
    assert 60 < changed < 140  # 100 ± 5.7 σ
