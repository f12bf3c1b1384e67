"""The swarm order of a fetch: each fetcher's place among itself and its peers (the origin left out),
its own window first and the others' blocks trailing its own progress, one block per bitswap session;
against real Kubo daemons where the order meets the network, against a recording stand-in for the
order itself."""

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from ledger_client.ipfs.checkpoints import fetch_checkpoint, load_state_dict, publish_checkpoint
from ledger_client.ipfs.checkpoints.fetch import (
    _download_verified,
    _manifest_origin,
    _prefetch,
    _prefetch_plan,
    _start_offset,
    _swarm_position,
)
from ledger_client.ipfs.kubo import KuboClient, KuboNotFound
from protocol.digest import DAG_PB, RAW, digest_to_cid
from protocol.manifest import StoredFile


def test_connected_fetchers_start_at_different_shards_and_a_lone_node_at_the_first(kubo_swarm, kubo):
    nodes = kubo_swarm(3)
    positions = []
    for node in nodes:
        with KuboClient(node.api_multiaddr) as client:
            positions.append(_swarm_position(client))
    assert sorted(positions) == [(0, 3), (1, 3), (2, 3)]
    assert sorted(_start_offset(p, 8) for p in positions) == [0, 2, 5]  # spread over 8 shards
    with KuboClient(nodes[0].api_multiaddr) as client:  # the origin left out: ranks among the other two
        assert _swarm_position(client, {nodes[1].peer_id}) in [(0, 2), (1, 2)]
        assert _swarm_position(client, {nodes[0].peer_id}) in [(0, 3), (1, 3), (2, 3)]  # never itself
    assert _swarm_position(kubo) == (0, 1)  # offline: alone
    assert _start_offset((0, 1), 8) == 0


def test_the_plan_gives_every_block_once_own_window_first_others_trailing_by_the_lag():
    blocks = list(range(10))
    own, trailing = _prefetch_plan(blocks, rank=1, size=3, lag=2)
    assert own == [3, 4, 5]  # windows [0, 1, 2], [3, 4, 5], [6, 7, 8, 9]
    assert [b for _, b in trailing] == [6, 0, 7, 1, 8, 2, 9]  # j by j across the windows after this one
    assert [gate for gate, _ in trailing] == [2, 2, 3, 3, 3, 3, 3]  # min(j + lag, len(own))
    assert sorted(own + [b for _, b in trailing]) == blocks
    assert _prefetch_plan(blocks, rank=0, size=1) == (blocks, [])


class RecordingKubo:
    """Stands in for KuboClient in _prefetch: files of raw leaves under one root each; records the
    order of fetch_block calls and how many own blocks were done at each."""

    def __init__(self, leaves: dict[str, list[str]], missing: set[str] = frozenset()) -> None:
        self.leaves = leaves
        self.missing = missing
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def links(self, cid, *, timeout=None):
        return [(leaf, 10) for leaf in self.leaves[cid]]

    def fetch_block(self, cid, *, timeout=None):
        with self.lock:
            self.calls.append(cid)
        if cid in self.missing:
            raise KuboNotFound(f"block/stat {cid}: no reachable peer provided it in time")
        return 10


def _cid(text: str, codec: int) -> str:
    return digest_to_cid(hashlib.sha256(text.encode()).digest(), codec)


def _raw(n: int) -> str:
    return _cid(f"leaf {n}", RAW)


def _files(count: int, per_file: int) -> tuple[list[StoredFile], dict[str, list[str]]]:
    files, leaves = [], {}
    for i in range(count):
        root = _cid(f"file {i}", DAG_PB)
        leaves[root] = [_raw(i * per_file + k) for k in range(per_file)]
        files.append(StoredFile(name=f"s{i}.safetensors", cid=root, sha256="0" * 64, size=10 * per_file))
    return files, leaves


class Sum:
    def __init__(self):
        self.total = 0
        self.lock = threading.Lock()

    def start(self, total_bytes, total_files):
        pass

    def advance(self, n):
        with self.lock:
            self.total += n

    def file_done(self, name):
        pass


def test_prefetch_asks_for_a_trailing_block_only_after_enough_own_blocks():
    files, leaves = _files(3, 4)  # 12 blocks, 3 windows of 4
    kubo = RecordingKubo(leaves)
    progress = Sum()
    credit, count = _prefetch(kubo, files, (2, 3), parallel=1, timeout=5, progress=progress)
    assert count == 12 and progress.total == 120
    assert credit == {f.name: 40 for f in files}
    own = leaves[files[2].cid]
    order = kubo.calls
    for position, cid in enumerate(order):
        if cid in own:
            continue
        j = next(leaf.index(cid) for leaf in leaves.values() if cid in leaf)
        assert sum(c in own for c in order[:position]) >= min(j + 4, 4), (position, cid)
    assert order[0] == own[0] and sorted(order) == sorted(c for leaf in leaves.values() for c in leaf)


def test_prefetch_stops_at_the_first_unavailable_block_and_leaves_the_rest_to_the_download():
    files, leaves = _files(2, 4)
    kubo = RecordingKubo(leaves, missing={leaves[files[0].cid][1]})
    credit, count = _prefetch(kubo, files, (0, 2), parallel=1, timeout=5, progress=Sum())
    assert count < 8 and sum(credit.values()) == 10 * count
    assert len(kubo.calls) < 8  # it did not go on asking for every block


def test_bytes_the_prefetch_reported_are_not_reported_again_by_the_download(tmp_path):
    class Streams:
        def cat_to_file(self, cid, destination, *, timeout=None, on_bytes=None, max_bytes=None):
            data = b"x" * 100
            for k in range(0, 100, 30):
                on_bytes(len(data[k:k + 30]))
            Path(destination).write_bytes(data)
            return hashlib.sha256(data).hexdigest()

    stored = StoredFile(name="a.bin", cid=_raw(1), sha256=hashlib.sha256(b"x" * 100).hexdigest(), size=100)
    progress = Sum()
    assert _download_verified(Streams(), stored, tmp_path, 0, 5, progress, credit=70) == 0
    assert progress.total == 30 and (tmp_path / "a.bin").read_bytes() == b"x" * 100


def test_the_origin_is_the_one_peer_that_sent_the_most_manifest_bytes():
    before = {"a": 100, "b": 0, "c": 7}
    assert _manifest_origin(before, {"a": 100, "b": 0, "c": 7}) == set()
    assert _manifest_origin(before, {"a": 900, "b": 300, "c": 7}) == {"a"}
    # duplicate copies from every peer (bitswap asked them all): still one origin, the same on every node
    assert _manifest_origin(before, {"a": 400, "b": 300, "c": 307}) == {"a"}
    assert _manifest_origin({}, {"b": 5, "a": 5}) == {"a"}


def test_concurrent_fetchers_split_the_checkpoint_and_each_holds_a_verified_copy(kubo_swarm, tmp_path):
    torch.manual_seed(0)
    state = {f"layer{i}.weight": torch.randn(512, 512) for i in range(6)}  # 6 MiB: 6 blocks of 1 MiB
    origin, *fetchers = kubo_swarm(4)
    with KuboClient(origin.api_multiaddr) as kubo:
        published = publish_checkpoint(kubo, state, step=1, shard_bytes=2 << 20)
        blocks = sum(len(kubo.links(shard.cid)) for shard in published.manifest.shards)

    def fetch(node):
        with KuboClient(node.api_multiaddr) as client:
            return fetch_checkpoint(client, published.digest, tmp_path / node.peer_id, timeout=60)

    with ThreadPoolExecutor(len(fetchers)) as pool:
        results = list(pool.map(fetch, fetchers))
    # each left out one peer, the one that served it the manifest (the publisher, unless another
    # fetcher was a few milliseconds quicker), and brought every block in one by one, in its swarm order
    assert [r.swarm[1] for r in results] == [3, 3, 3]
    assert all(r.prefetched_blocks == blocks > len(published.manifest.shards) for r in results)
    for result in results:
        loaded = load_state_dict(result)
        assert all(torch.equal(loaded[name], state[name]) for name in state)
