"""Starting and stopping real Kubo daemons (needs the Kubo binary; skips without it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from deploy.kubo_node import PID_FILE, KuboBinaryNotFound, KuboNode, KuboStartError, find_ipfs_binary, stop_daemon
from ledger_client.ipfs.kubo import KuboClient
from tests.support.conftest_kubo import KuboSwarm


def test_offline_node_serves_its_api_on_a_loopback_port(kubo_node: KuboNode) -> None:
    assert kubo_node.api_multiaddr.startswith("/ip4/127.0.0.1/tcp/")
    assert kubo_node.api_url.startswith("http://127.0.0.1:")
    assert kubo_node.is_running()
    with KuboClient(kubo_node.api_url) as client:
        assert client.id().peer_id == kubo_node.peer_id


def test_daemon_started_here_is_stopped_from_another_process(tmp_path: Path) -> None:
    node = KuboNode.start(tmp_path / "repo", offline=True)
    try:
        assert (tmp_path / "repo" / PID_FILE).exists()
        script = (
            "import sys; from deploy.kubo_node import KuboNode, stop_daemon; "
            "print(KuboNode.attach(sys.argv[1]).peer_id); print(stop_daemon(sys.argv[1]))"
        )
        result = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / "repo")],
            capture_output=True, text=True, timeout=60, check=True,
        )
        assert result.stdout.split() == [node.peer_id, "True"]
        assert not node.is_running()
        assert not (tmp_path / "repo" / PID_FILE).exists()
    finally:
        node.stop()


def test_a_stopped_repo_restarts_with_the_same_identity(tmp_path: Path) -> None:
    with KuboNode.start(tmp_path, offline=True) as first:
        peer_id = first.peer_id
    assert stop_daemon(tmp_path) is False
    with pytest.raises(KuboStartError, match="no Kubo daemon is running"):
        KuboNode.attach(tmp_path)
    with KuboNode.start(tmp_path, offline=True) as second:
        assert second.peer_id == peer_id
        with pytest.raises(KuboStartError, match="already running"):
            KuboNode.start(tmp_path, offline=True)


def test_online_nodes_connect_only_to_each_other(kubo_swarm: KuboSwarm) -> None:
    a, b = kubo_swarm(2)
    assert all("/127.0.0.1/" in addr for addr in a.swarm_multiaddrs)
    with KuboClient(a.api_multiaddr) as client:
        assert client.swarm_peers() == [b.peer_id]


def test_missing_binary_is_a_named_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PROOFSWARM_IPFS_BIN", str(tmp_path / "nope"))
    with pytest.raises(KuboBinaryNotFound, match="PROOFSWARM_IPFS_BIN"):
        find_ipfs_binary()
