"""pytest fixtures for real Kubo daemons on loopback (registered as a plugin by tests/conftest.py).

``kubo_node``: one offline daemon shared by the whole test session.
``kubo_swarm``: a factory, ``kubo_swarm(n)`` -> n online daemons, each connected to all the others.
Tests skip with a stated reason when no Kubo binary is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from deploy.kubo_node import KuboBinaryNotFound, KuboNode, find_ipfs_binary
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
                node.connect(other)
        return nodes

    yield make
    for node in started:
        node.stop()
