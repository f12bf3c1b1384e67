"""Fetchers of one checkpoint start at different shards: each at its rank among itself and its peers."""

from ledger_client.ipfs.checkpoints.fetch import _start_offset
from ledger_client.ipfs.kubo import KuboClient


def test_connected_fetchers_start_at_different_shards_and_a_lone_node_at_the_first(kubo_swarm, kubo):
    nodes = kubo_swarm(3)
    offsets = []
    for node in nodes:
        with KuboClient(node.api_multiaddr) as client:
            offsets.append(_start_offset(client, 8))
    assert sorted(offsets) == [0, 2, 5]  # ranks 0, 1, 2 of 3, spread over 8 shards
    assert _start_offset(kubo, 8) == 0  # offline: manifest order
