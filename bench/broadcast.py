"""Broadcast of one policy checkpoint to several workers: Kubo swarm vs a single HTTP origin.

    python -m bench.broadcast [--quick] [--nodes 3] [--mib N] [--shard-mib N] [--netns [--uplink-mbit 100]]

A random checkpoint (1 GiB; --quick: 256 MiB) is published from one Kubo node. A fresh node
fetches it alone (one_node_s); then `nodes` fresh nodes, all connected to the publisher and to
each other, fetch it at once (all_nodes_s: until every one holds a verified copy). The baseline
serves the same shard files from one Python `http.server` to the same number of concurrent
clients, which verify sha256 as they stream (http_origin_all_s). verify_gbps is single-thread
sha256 over the shard files. Every daemon runs on loopback on this machine, so the figures
measure CPU and disk, not a network. Prints a table, then one JSON object as the last line.

With `--netns` every node (publisher, the lone fetcher, each swarm fetcher) runs in its own
network namespace with an uplink of `--uplink-mbit` (bench/netns.py: veth pairs on one bridge,
tc tbf on each node's egress), created and removed by the benchmark; the HTTP origin serves from
the publisher's namespace, through the same uplink. The JSON gains `netns: true`, `uplink_mbit`,
`swarm_vs_http` (all_nodes_s / http_origin_all_s) and the load average before and after. Without
root or namespaces it prints why and `{"skipped": ...}`.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from bench.cleanup import exit_on_signals
from bench.netns import NetnsLab, netns_unavailable
from bench.report import add_record_option, print_rows
from deploy.kubo_node import KuboNode, find_ipfs_binary
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


def timed_fetches(nodes: list[KuboNode], digest: bytes, store: Path, seen: list[list[int]] | None = None) -> float:
    """Seconds until every node in ``nodes`` holds a verified copy (fetching concurrently). ``seen``
    receives, per node, [rank, fetchers it saw, blocks it brought in one by one in the swarm order]."""

    def fetch(node: KuboNode) -> list[int]:
        with KuboClient(node.api_multiaddr, timeout=600) as client:
            got = fetch_checkpoint(client, digest, store / node.peer_id, parallel=PARALLEL_SHARDS, timeout=600)
        return [*got.swarm, got.prefetched_blocks]

    started = time.perf_counter()
    with ThreadPoolExecutor(len(nodes)) as pool:
        positions = [future.result() for future in [pool.submit(fetch, node) for node in nodes]]
    elapsed = time.perf_counter() - started
    if seen is not None:
        seen.extend(positions)
    return elapsed


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
    try:
        return timed_http_downloads(f"http://127.0.0.1:{server.server_address[1]}", manifest, clients, store)
    finally:
        server.shutdown()
        server.server_close()


def timed_http_downloads(base: str, manifest: CheckpointManifest, clients: int, store: Path) -> float:
    """Seconds for ``clients`` concurrent clients to download every shard from ``base``, verifying sha256."""

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
    with ThreadPoolExecutor(clients * PARALLEL_SHARDS) as pool:
        for future in [pool.submit(download, *job) for job in jobs]:
            future.result()
    return time.perf_counter() - started


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
        return {**_timings(published.manifest, nodes, publish_s, one_node_s, all_nodes_s, http_s),
                "verify_gbps": round(gbps, 3)}


def start_namespaced_nodes(lab: NetnsLab, root: Path, indices: list[int], peers: list[KuboNode]) -> list[KuboNode]:
    """Start a Kubo node inside each namespace of ``indices`` (API on its control link, swarm on its
    shaped data link), connected to ``peers`` and to one another."""
    nodes = []
    for i in indices:
        wrapper = root / f"ipfs-in-{lab.namespace(i)}"
        binary = find_ipfs_binary().absolute()
        wrapper.write_text(f"#!/bin/sh\nexec {' '.join(lab.exec_prefix(i))} {binary} \"$@\"\n")
        wrapper.chmod(0o755)
        nodes.append(KuboNode.start(root / f"repo-{i}", binary=wrapper, api_host=lab.control_ip(i),
                                    swarm_host=lab.data_ip(i)))
    for k, node in enumerate(nodes):
        for other in [*peers, *nodes[k + 1 :]]:
            node.connect(other)
    return nodes


def namespaced_http_origin_seconds(lab: NetnsLab, shard_dir: Path, manifest: CheckpointManifest, clients: int,
                                   store: Path) -> float:
    """The HTTP baseline with the server in the publisher's namespace (node 0), behind its uplink."""
    port = 8000
    server = subprocess.Popen(
        [*lab.exec_prefix(0), sys.executable, "-m", "http.server", "--bind", lab.data_ip(0), str(port),
         "--directory", str(shard_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection((lab.data_ip(0), port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the HTTP origin in the publisher's namespace did not start") from None
                time.sleep(0.1)
        return timed_http_downloads(f"http://{lab.data_ip(0)}:{port}", manifest, clients, store)
    finally:
        server.terminate()
        server.wait(10)


def run_netns(total_mib: int, shard_mib: int, nodes: int, uplink_mbit: float) -> dict[str, object]:
    """The broadcast with every node in its own namespace behind a ``uplink_mbit`` uplink."""
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-broadcast-netns-") as tmp, NetnsLab(nodes + 2, uplink_mbit) as lab:
        root = Path(tmp)
        state = random_state_dict(total_mib << 20, tensor_bytes=(shard_mib << 20) // 4)
        (publisher,) = start_namespaced_nodes(lab, root, [0], [])
        try:
            with KuboClient(publisher.api_multiaddr, timeout=600) as kubo:
                started = time.perf_counter()
                published = publish_checkpoint(kubo, state, step=1, shard_bytes=shard_mib << 20)
                publish_s = time.perf_counter() - started
            del state
            (alone,) = start_namespaced_nodes(lab, root, [1], [publisher])
            one_node_s = timed_fetches([alone], published.digest, root / "one")
            alone.stop()
            shard_dir = next((root / "one").iterdir()) / published.manifest_cid
            fetchers = start_namespaced_nodes(lab, root, list(range(2, nodes + 2)), [publisher])
            try:
                before = [lab.sent_bytes(i) for i in [0, *range(2, nodes + 2)]]
                seen: list[list[int]] = []
                all_nodes_s = timed_fetches(fetchers, published.digest, root / "swarm", seen)
                sent = [lab.sent_bytes(i) - b for i, b in zip([0, *range(2, nodes + 2)], before, strict=True)]
            finally:
                for node in fetchers:
                    node.stop()
        finally:
            publisher.stop()
        http_s = namespaced_http_origin_seconds(lab, shard_dir, published.manifest, nodes, root / "http")
    total = sum(s.size for s in published.manifest.shards)
    return {
        **_timings(published.manifest, nodes, publish_s, one_node_s, all_nodes_s, http_s),
        "swarm_vs_http": round(all_nodes_s / http_s, 3),
        "uplink_floor_s": round(total * 8 / (uplink_mbit * 1e6), 3),  # one copy through one uplink
        # during the swarm fetch: copies of the checkpoint the publisher's uplink carried, and each fetcher's
        "publisher_sent_copies": round(sent[0] / total, 3),
        "fetcher_sent_copies": [round(b / total, 3) for b in sent[1:]],
        "fetcher_swarm": seen,  # per fetcher: [rank, fetchers it saw, blocks fetched one by one]
        "netns": True,
        "uplink_mbit": uplink_mbit,
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
    }


def _timings(manifest, nodes: int, publish_s: float, one_node_s: float, all_nodes_s: float,
             http_s: float) -> dict:
    """The figures both modes report: sizes, publish time, one node vs all nodes, the HTTP origin."""
    return {
        "nodes": nodes,
        "bytes": sum(s.size for s in manifest.shards),
        "shards": len(manifest.shards),
        "publish_s": round(publish_s, 3),
        "one_node_s": round(one_node_s, 3),
        "all_nodes_s": round(all_nodes_s, 3),
        "swarm_ratio": round(all_nodes_s / one_node_s, 3),
        "http_origin_all_s": round(http_s, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.broadcast", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="256 MiB instead of 1 GiB")
    parser.add_argument("--nodes", type=int, default=3, help="concurrent fetching nodes (default 3)")
    parser.add_argument("--mib", type=int, help="checkpoint size in MiB (overrides --quick)")
    parser.add_argument("--shard-mib", type=int, help="shard size in MiB (default: size / 8)")
    parser.add_argument("--netns", action="store_true", help="each node in its own network namespace, shaped uplinks")
    parser.add_argument("--uplink-mbit", type=float, default=100.0, help="with --netns: each node's uplink (default 100)")
    add_record_option(parser)
    args = parser.parse_args()
    if args.nodes < 1 or (args.netns and args.nodes > 200) or args.uplink_mbit <= 0:
        parser.error("--nodes must be 1..200 and --uplink-mbit positive")
    total_mib = args.mib or (256 if args.quick else 1024)
    shard_mib = args.shard_mib or max(1, total_mib // 8)
    if args.netns:
        reason = netns_unavailable()
        if reason is not None:
            print(f"skipped: {reason}")
            print(json.dumps({"skipped": reason, "netns": True, "uplink_mbit": args.uplink_mbit}))
            if args.record is not None:
                print("not recorded: the run was skipped", file=sys.stderr)
            return
        result = run_netns(total_mib, shard_mib, args.nodes, args.uplink_mbit)
        print(f"broadcast of a {total_mib} MiB checkpoint in {result['shards']} shards of {shard_mib} MiB, "
              f"every node in its own namespace behind a {args.uplink_mbit:g} Mbit/s uplink")
    else:
        result = run(total_mib, shard_mib, args.nodes)
        print(f"broadcast of a {total_mib} MiB checkpoint in {result['shards']} shards of {shard_mib} MiB")
    rows = [
        ("publish (add to Kubo)", f"{result['publish_s']:.2f} s"),
        ("one node alone", f"{result['one_node_s']:.2f} s"),
        (f"{args.nodes} nodes at once (Kubo swarm)", f"{result['all_nodes_s']:.2f} s"),
        ("swarm ratio (all / one)", f"{result['swarm_ratio']:.2f}"),
        (f"{args.nodes} clients, one HTTP origin", f"{result['http_origin_all_s']:.2f} s"),
    ]
    if args.netns:
        rows += [("swarm / HTTP origin", f"{result['swarm_vs_http']:.2f}"),
                 ("one copy through one uplink", f"{result['uplink_floor_s']:.2f} s")]
    else:
        rows += [("sha256 verify, one thread", f"{result['verify_gbps']:.2f} GB/s")]
    print_rows(rows, result, args, "broadcast")


if __name__ == "__main__":
    exit_on_signals()
    main()
