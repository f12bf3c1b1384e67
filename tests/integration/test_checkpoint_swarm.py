"""A checkpoint spreads as a swarm: three real Kubo daemons on loopback, no public network."""

from __future__ import annotations

from pathlib import Path

import torch

from ledger_client.ipfs.checkpoints import fetch_checkpoint, load_state_dict, publish_checkpoint
from ledger_client.ipfs.kubo import KuboClient
from tests.support.conftest_kubo import KuboSwarm


def test_a_worker_that_fetched_serves_the_next_one_after_the_publisher_left(
    kubo_swarm: KuboSwarm, tmp_path: Path
) -> None:
    torch.manual_seed(0)
    state = {f"layer{i}.weight": torch.randn(256, 256) for i in range(6)}  # 1.5 MiB, 6 shards
    trainer, worker_b, worker_c = kubo_swarm(3)
    with KuboClient(trainer.api_multiaddr) as a, KuboClient(worker_b.api_multiaddr) as b, \
            KuboClient(worker_c.api_multiaddr) as c:
        published = publish_checkpoint(a, state, step=1, shard_bytes=256 * 1024)
        fetched_b = fetch_checkpoint(b, published.digest, tmp_path / "b", timeout=30)
        assert len(fetched_b.downloaded) == 6

        assert worker_b.peer_id in c.find_providers(published.manifest_cid)
        trainer.stop()
        assert trainer.peer_id not in c.swarm_peers()
        assert not c.has_local(published.manifest_cid)

        fetched_c = fetch_checkpoint(c, published.digest, tmp_path / "c", timeout=30)
        assert len(fetched_c.downloaded) == 6
        assert published.manifest_cid in c.pin_ls()
        loaded = load_state_dict(fetched_c)
        assert all(torch.equal(loaded[name], state[name]) for name in state)
