"""The Kubo RPC client against a real daemon (skips without the Kubo binary)."""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path

import pytest

from ledger_client.ipfs.kubo import KuboClient, KuboNotFound, KuboUnreachable
from protocol.digest import RAW, cid_codec, cid_to_digest, digest_to_cid, raw_cid_of
from tests.support.conftest_kubo import KuboSwarm


def test_version_is_the_pinned_kubo(kubo: KuboClient) -> None:
    assert kubo.version() == "0.42.0"


def test_small_object_gets_a_raw_cid_whose_digest_is_its_sha256(kubo: KuboClient) -> None:
    data = b'{"manifest": "example"}'
    cid = kubo.add_bytes(data)
    assert cid == raw_cid_of(data)
    assert cid_codec(cid) == RAW
    assert cid_to_digest(cid) == hashlib.sha256(data).digest()
    assert kubo.cat(digest_to_cid(hashlib.sha256(data).digest())) == data


def test_large_file_streams_to_disk_bit_identically(kubo: KuboClient, tmp_path: Path) -> None:
    source = tmp_path / "big.bin"
    source.write_bytes(os.urandom(3 * (1 << 20) + 12345))
    cid = kubo.add_file(source)
    seen: list[int] = []
    sha = kubo.cat_to_file(cid, tmp_path / "out" / "big.bin", on_bytes=seen.append)
    assert (tmp_path / "out" / "big.bin").read_bytes() == source.read_bytes()
    assert sha == hashlib.sha256(source.read_bytes()).hexdigest()
    assert sum(seen) == source.stat().st_size
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".part")]


def test_pin_add_rm_ls(kubo: KuboClient) -> None:
    cid = kubo.add_bytes(b"pin me", pin=False)
    assert cid not in kubo.pin_ls()
    kubo.pin_add(cid)
    assert cid in kubo.pin_ls()
    kubo.pin_rm(cid)
    kubo.pin_rm(cid)  # unpinning twice is not an error
    assert cid not in kubo.pin_ls()


def test_pins_of_several_cids_go_in_one_request(kubo: KuboClient) -> None:
    cids = [kubo.add_bytes(f"pin us {i}".encode(), pin=False) for i in range(3)]
    kubo.pin_add(*cids)
    assert set(cids) <= kubo.pin_ls()
    kubo.pin_rm(cids[0])
    kubo.pin_rm(*cids)  # one of them no longer pinned: the others are unpinned all the same
    assert not set(cids) & kubo.pin_ls()
    kubo.pin_add()  # nothing to pin or unpin: no request
    kubo.pin_rm()


def test_content_nobody_has_times_out_with_a_named_error(kubo: KuboClient, tmp_path: Path) -> None:
    missing = raw_cid_of(os.urandom(32))
    assert not kubo.has_local(missing)
    with pytest.raises(KuboNotFound):
        kubo.cat(missing, timeout=1)
    with pytest.raises(KuboNotFound):
        kubo.cat_to_file(missing, tmp_path / "x", timeout=1)
    assert list(tmp_path.iterdir()) == []


def test_unreachable_daemon_is_a_one_line_named_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with KuboClient(f"/ip4/127.0.0.1/tcp/{port}") as client, pytest.raises(KuboUnreachable) as info:
        client.version()
    assert f"/ip4/127.0.0.1/tcp/{port}" in str(info.value)
    assert "\n" not in str(info.value)


def test_content_added_on_one_node_is_fetched_by_a_connected_peer(kubo_swarm: KuboSwarm) -> None:
    a, b = kubo_swarm(2)
    payload = os.urandom(2 * (1 << 20))
    with KuboClient(a.api_multiaddr) as ka, KuboClient(b.api_multiaddr) as kb:
        cid = ka.add_bytes(payload)
        assert not kb.has_local(cid)
        assert kb.cat(cid, timeout=30) == payload
        assert kb.has_local(cid)


def test_online_search_for_missing_content_ends_at_the_deadline(kubo_swarm: KuboSwarm) -> None:
    (node,) = kubo_swarm(1)
    with KuboClient(node.api_multiaddr) as client:
        with pytest.raises(KuboNotFound, match="in time"):
            client.cat(raw_cid_of(os.urandom(32)), timeout=1)
        with pytest.raises(KuboNotFound, match="no data for 1s"):
            client.cat_to_file(raw_cid_of(os.urandom(32)), node.repo / "never", timeout=1)
    assert not (node.repo / "never").exists()
