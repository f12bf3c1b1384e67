"""pytest fixtures for real Kubo daemons on loopback (registered as a plugin by tests/conftest.py).

``kubo_node``: one offline daemon shared by the whole test session.
``kubo_swarm``: a factory, ``kubo_swarm(n)`` -> n online daemons, each connected to all the others.
Tests skip with a stated reason when no Kubo binary is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from deploy.kubo_node import KuboBinaryNotFound, KuboNode, KuboStartError, find_ipfs_binary
from ledger_client.chain.queries import wait_for
from ledger_client.ipfs.kubo import KuboClient


def _require_kubo() -> Path:
    try:
        return find_ipfs_binary()
    except KuboBinaryNotFound as exc:
        pytest.skip(f"real Kubo needed: {exc}")


@pytest.fixture(scope="session")
def kubo_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KuboNode]:
    """One offline Kubo daemon for the test session."""
    binary = _require_kubo()
    with KuboNode.start(tmp_path_factory.mktemp("kubo-session"), offline=True, binary=binary) as node:
        yield node


@pytest.fixture
def kubo(kubo_node: KuboNode) -> Iterator[KuboClient]:
    """A client for the session's offline daemon."""
    with KuboClient(kubo_node.api_multiaddr) as client:
        yield client


KuboSwarm = Callable[[int], list[KuboNode]]


def _fully_connected(nodes: list[KuboNode]) -> bool:
    """True when every node lists every other among its peers; reconnects the pairs that are missing."""
    complete = True
    for node in nodes:
        with KuboClient(node.api_multiaddr) as client:
            peers = set(client.swarm_peers())
        for other in nodes:
            if other is not node and other.peer_id not in peers:
                complete = False
                _try_connect(node, other)
    return complete


def _try_connect(node: KuboNode, other: KuboNode) -> None:
    try:
        node.connect(other)
    except KuboStartError:
        pass  # a simultaneous dial: the caller checks the peer lists and dials again


@pytest.fixture
def kubo_swarm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KuboSwarm]:
    """Factory: ``kubo_swarm(n)`` starts n online daemons, fully connected; all stop at teardown."""
    binary = _require_kubo()
    started: list[KuboNode] = []

    def make(count: int) -> list[KuboNode]:
        nodes = []
        for _ in range(count):
            node = KuboNode.start(tmp_path_factory.mktemp("kubo-swarm"), binary=binary)
            started.append(node)
            nodes.append(node)
        for i, node in enumerate(nodes):
            for other in nodes[i + 1 :]:
                _try_connect(node, other)
        # `swarm connect` returns once this side has the connection; the other side may list it a moment
        # later, and a dial that meets the other side's dial fails its handshake ("unexpected handshake
        # message"): wait until every node lists every other, dialling again what is missing
        if not wait_for(lambda: _fully_connected(nodes), timeout=30, interval=0.1):
            raise RuntimeError(f"{count} Kubo daemons did not connect to each other within 30 s")
        return nodes

    yield make
    for node in started:
        node.stop()
