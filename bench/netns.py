"""A test network on this machine: one network namespace per node, rate-limited uplinks.

    hub namespace: one bridge ── veth ── node 0 (10.201.0.1)   uplink: tc tbf at `uplink_mbit`
                              ── veth ── node 1 (10.201.0.2)   on the node's side of its veth
                              ── ...
                              ── veth ── this process (10.201.0.254, unshaped: an observer)
    control: every node also has an unshaped point-to-point veth to this process
             (10.202.<i>.1 here, 10.202.<i>.2 in the node) for its Kubo RPC API, so moving a
             checkpoint from a node's daemon to this process's client does not use the uplink.

Only egress is shaped, like a home or cloud uplink: a node sends at most `uplink_mbit`, receives
as fast as its peers send. Everything is created by `NetnsLab.__enter__` and removed by
`__exit__` (deleting a namespace deletes the veths in it). Needs root and `ip`/`tc`
(iproute2); `netns_unavailable()` says why not, for the benchmark to skip.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from pathlib import Path
from types import TracebackType

TC = shutil.which("tc") or "/usr/sbin/tc"
IP = shutil.which("ip") or "/usr/sbin/ip"
DATA_NET = "10.201.0"
CONTROL_NET = "10.202"
OBSERVER_IP = f"{DATA_NET}.254"


class NetnsError(RuntimeError):
    """A namespace, link or qdisc could not be created."""


def _run(*args: str) -> None:
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise NetnsError(f"{' '.join(args)}: {result.stderr.strip() or result.returncode}")


def netns_unavailable() -> str | None:
    """Why this process cannot build the lab (None when it can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if not (Path(IP).exists() and Path(TC).exists()):
        return f"iproute2 is missing ({IP}, {TC})"
    probe = f"psprobe{secrets.token_hex(3)}"
    try:
        _run(IP, "netns", "add", probe)
    except NetnsError as exc:
        return f"cannot create a network namespace: {exc}"
    try:
        _run(IP, "netns", "exec", probe, TC, "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "1mbit",
             "burst", "32kb", "latency", "50ms")
    except NetnsError as exc:
        return f"cannot shape a link with tc: {exc}"
    finally:
        subprocess.run([IP, "netns", "delete", probe], capture_output=True, timeout=30)
    return None


class NetnsLab:
    """`nodes` namespaces on one bridge, each with a `uplink_mbit` uplink and a control link."""

    def __init__(self, nodes: int, uplink_mbit: float) -> None:
        if not 1 <= nodes <= 250:
            raise ValueError("1 to 250 nodes")
        self.nodes = nodes
        self.uplink_mbit = uplink_mbit
        self.tag = secrets.token_hex(2)  # interface names are at most 15 characters
        self.hub = f"ps{self.tag}hub"
        self._created: list[str] = []

    def namespace(self, i: int) -> str:
        return f"ps{self.tag}n{i}"

    def data_ip(self, i: int) -> str:
        return f"{DATA_NET}.{i + 1}"

    def control_ip(self, i: int) -> str:
        """The node's end of its control link (where its Kubo API listens)."""
        return f"{CONTROL_NET}.{i}.2"

    def exec_prefix(self, i: int) -> list[str]:
        """Prefix a command with this to run it inside node `i`."""
        return [IP, "netns", "exec", self.namespace(i)]

    def sent_bytes(self, i: int) -> int:
        """Bytes node `i` has sent over its uplink so far."""
        result = subprocess.run([*self.exec_prefix(i), "cat", "/sys/class/net/data/statistics/tx_bytes"],
                                capture_output=True, text=True, timeout=30, check=True)
        return int(result.stdout)

    def __enter__(self) -> NetnsLab:
        try:
            self._add_namespace(self.hub)
            hub = [IP, "-n", self.hub]
            _run(*hub, "link", "add", "br0", "type", "bridge")
            _run(*hub, "link", "set", "br0", "up")
            self._attach_observer()
            for i in range(self.nodes):
                self._add_node(i)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _add_namespace(self, name: str) -> None:
        _run(IP, "netns", "add", name)
        self._created.append(name)
        _run(IP, "-n", name, "link", "set", "lo", "up")

    def _attach_observer(self) -> None:
        here, there = f"ps{self.tag}obs", f"ps{self.tag}obh"
        _run(IP, "link", "add", here, "type", "veth", "peer", "name", there, "netns", self.hub)
        _run(IP, "addr", "add", f"{OBSERVER_IP}/24", "dev", here)
        _run(IP, "link", "set", here, "up")
        _run(IP, "-n", self.hub, "link", "set", there, "master", "br0", "up")

    def _add_node(self, i: int) -> None:
        ns = self.namespace(i)
        self._add_namespace(ns)
        # data: node <-> hub bridge, shaped on the node's side (its uplink)
        _run(IP, "-n", ns, "link", "add", "data", "type", "veth", "peer", "name", f"n{i}", "netns", self.hub)
        _run(IP, "-n", self.hub, "link", "set", f"n{i}", "master", "br0", "up")
        _run(IP, "-n", ns, "addr", "add", f"{self.data_ip(i)}/24", "dev", "data")
        _run(IP, "-n", ns, "link", "set", "data", "up")
        # burst above one GSO super-packet (64 KiB), or tbf drops them all
        _run(IP, "netns", "exec", ns, TC, "qdisc", "add", "dev", "data", "root", "tbf", "rate",
             f"{self.uplink_mbit}mbit", "burst", "256kb", "latency", "100ms")
        # control: node <-> this process, unshaped
        here = f"ps{self.tag}c{i}"
        _run(IP, "link", "add", here, "type", "veth", "peer", "name", "control", "netns", ns)
        _run(IP, "addr", "add", f"{CONTROL_NET}.{i}.1/30", "dev", here)
        _run(IP, "link", "set", here, "up")
        _run(IP, "-n", ns, "addr", "add", f"{self.control_ip(i)}/30", "dev", "control")
        _run(IP, "-n", ns, "link", "set", "control", "up")

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for name in reversed(self._created):
            subprocess.run([IP, "netns", "delete", name], capture_output=True, timeout=30)
        self._created.clear()
        # the observer's veth lives in this namespace; deleting the hub took its peer, and with it the pair
        subprocess.run([IP, "link", "delete", f"ps{self.tag}obs"], capture_output=True, timeout=30)
