"""Broadcast of one policy checkpoint to several workers: Kubo swarm vs a single HTTP origin.

    python -m bench.broadcast [--quick] [--nodes 3] [--mib N] [--shard-mib N]

A random checkpoint (1 GiB; --quick: 256 MiB) is published from one Kubo node. A fresh node
fetches it alone (one_node_s); then `nodes` fresh nodes, all connected to the publisher and to
each other, fetch it at once (all_nodes_s: until every one holds a verified copy). The baseline
serves the same shard files from one Python `http.server` to the same number of concurrent
clients, which verify sha256 as they stream (http_origin_all_s). verify_gbps is single-thread
sha256 over the shard files. Every daemon runs on loopback on this machine, so the figures
measure CPU and disk, not a network. Prints a table, then one JSON object as the last line.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import http.server
import json
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from deploy.kubo_node import KuboNode
from ledger_client.ipfs.checkpoints import fetch_checkpoint, publish_checkpoint
from ledger_client.ipfs.kubo import KuboClient
from protocol.manifest import CheckpointManifest

PARALLEL_SHARDS = 4


def random_state_dict(total_bytes: int, tensor_bytes: int) -> dict[str, torch.Tensor]:
    """Incompressible float32 tensors adding up to ``total_bytes``."""
    generator = torch.Generator().manual_seed(0)
    count = max(1, total_bytes // tensor_bytes)
    return {
        f"layers.{i}.weight": torch.empty(tensor_bytes // 4, dtype=torch.int32)
        .random_(generator=generator)
        .view(torch.float32)
        for i in range(count)
    }


def start_nodes(root: Path, count: int, peers: list[KuboNode]) -> list[KuboNode]:
    """Start ``count`` online nodes, each connected to ``peers`` and to one another."""
    nodes = [KuboNode.start(root / f"node-{len(list(root.iterdir()))}-{i}") for i in range(count)]
    for i, node in enumerate(nodes):
        for other in [*peers, *nodes[i + 1 :]]:
            node.connect(other)
    return nodes


def timed_fetches(nodes: list[KuboNode], digest: bytes, store: Path) -> float:
    """Seconds until every node in ``nodes`` holds a verified copy (fetching concurrently)."""

    def fetch(node: KuboNode) -> None:
        with KuboClient(node.api_multiaddr, timeout=600) as client:
            fetch_checkpoint(client, digest, store / node.peer_id, parallel=PARALLEL_SHARDS, timeout=600)

    started = time.perf_counter()
    with ThreadPoolExecutor(len(nodes)) as pool:
        for future in [pool.submit(fetch, node) for node in nodes]:
            future.result()
    return time.perf_counter() - started


def http_origin_seconds(shard_dir: Path, manifest: CheckpointManifest, clients: int, store: Path) -> float:
    """Seconds for ``clients`` concurrent clients to download and verify every shard from one
    Python HTTP server."""

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(shard_dir))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def download(client: int, shard_name: str, sha256: str) -> None:
        hasher = hashlib.sha256()
        out_path = store / f"client-{client}" / shard_name
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(f"{base}/{shard_name}") as response, open(out_path, "wb") as out:
            while chunk := response.read(1 << 20):
                hasher.update(chunk)
                out.write(chunk)
        if hasher.hexdigest() != sha256:
            raise RuntimeError(f"client {client}: {shard_name} arrived corrupt")

    jobs = [(c, s.name, s.sha256) for c in range(clients) for s in manifest.shards]
    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(clients * PARALLEL_SHARDS) as pool:
            for future in [pool.submit(download, *job) for job in jobs]:
                future.result()
        return time.perf_counter() - started
    finally:
        server.shutdown()
        server.server_close()


def verify_gbps(files: list[Path]) -> float:
    """Single-thread sha256 throughput over ``files`` (warm page cache), in GB/s."""
    total = sum(f.stat().st_size for f in files)
    started = time.perf_counter()
    for path in files:
        hasher = hashlib.sha256()
        with open(path, "rb", buffering=0) as handle:
            while chunk := handle.read(8 << 20):
                hasher.update(chunk)
    return total / (time.perf_counter() - started) / 1e9


def run(total_mib: int, shard_mib: int, nodes: int) -> dict[str, float | int]:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="bench-broadcast-") as tmp:
        root = Path(tmp)
        (root / "repos").mkdir()
        state = random_state_dict(total_mib << 20, tensor_bytes=(shard_mib << 20) // 4)
        with KuboNode.start(root / "repos" / "publisher") as publisher:
            with KuboClient(publisher.api_multiaddr, timeout=600) as kubo:
                started = time.perf_counter()
                published = publish_checkpoint(kubo, state, step=1, shard_bytes=shard_mib << 20)
                publish_s = time.perf_counter() - started
            del state

            (alone,) = start_nodes(root / "repos", 1, [publisher])
            one_node_s = timed_fetches([alone], published.digest, root / "one")
            alone.stop()
            shard_dir = next((root / "one").iterdir()) / published.manifest_cid

            fetchers = start_nodes(root / "repos", nodes, [publisher])
            try:
                all_nodes_s = timed_fetches(fetchers, published.digest, root / "swarm")
            finally:
                for node in fetchers:
                    node.stop()

        http_s = http_origin_seconds(shard_dir, published.manifest, nodes, root / "http")
        gbps = verify_gbps([shard_dir / s.name for s in published.manifest.shards])
        return {
            "nodes": nodes,
            "bytes": sum(s.size for s in published.manifest.shards),
            "shards": len(published.manifest.shards),
            "publish_s": round(publish_s, 3),
            "one_node_s": round(one_node_s, 3),
            "all_nodes_s": round(all_nodes_s, 3),
            "swarm_ratio": round(all_nodes_s / one_node_s, 3),
            "http_origin_all_s": round(http_s, 3),
            "verify_gbps": round(gbps, 3),
        }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.broadcast", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="256 MiB instead of 1 GiB")
    parser.add_argument("--nodes", type=int, default=3, help="concurrent fetching nodes (default 3)")
    parser.add_argument("--mib", type=int, help="checkpoint size in MiB (overrides --quick)")
    parser.add_argument("--shard-mib", type=int, help="shard size in MiB (default: size / 8)")
    args = parser.parse_args()
    total_mib = args.mib or (256 if args.quick else 1024)
    shard_mib = args.shard_mib or max(1, total_mib // 8)
    result = run(total_mib, shard_mib, args.nodes)
    print(f"broadcast of a {total_mib} MiB checkpoint in {result['shards']} shards of {shard_mib} MiB")
    rows = [
        ("publish (add to Kubo)", f"{result['publish_s']:.2f} s"),
        ("one node alone", f"{result['one_node_s']:.2f} s"),
        (f"{args.nodes} nodes at once (Kubo swarm)", f"{result['all_nodes_s']:.2f} s"),
        ("swarm ratio (all / one)", f"{result['swarm_ratio']:.2f}"),
        (f"{args.nodes} clients, one HTTP origin", f"{result['http_origin_all_s']:.2f} s"),
        ("sha256 verify, one thread", f"{result['verify_gbps']:.2f} GB/s"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value:>10}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
