"""Start and stop real Kubo (IPFS) daemons on loopback, each with its repo in a given folder.

A node is private by construction: the repo is initialised with Kubo's ``test`` profile
(loopback addresses, no bootstrap peers, no mDNS), listens on ports the kernel picks, and never
asks the public network for configuration or routing. Nodes reach each other only through an
explicit ``swarm connect`` (see :meth:`KuboNode.connect`).

The daemon runs in its own session so it can outlive the Python process that started it (the
devnet): its pid goes to ``<repo>/proofswarm-daemon.pid`` and :func:`stop_daemon` stops it from
another process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Self

import requests

from ledger_client.ipfs.kubo import KuboError

PID_FILE = "proofswarm-daemon.pid"
LOG_FILE = "proofswarm-daemon.log"
READY_LINE = "Daemon is ready"

# Settings applied on top of the ``test`` profile. Each keeps a node off the public network.
_PRIVATE_CONFIG: dict[str, object] = {
    "AutoConf.Enabled": False,  # would fetch routing/bootstrap defaults from the internet
    "Bootstrap": [],
    "Routing.Type": "dht",  # "auto" adds delegated HTTP routers on the internet
    "Routing.DelegatedRouters": [],
    "Ipns.DelegatedPublishers": [],
    "DNS.Resolvers": {},
    "Discovery.MDNS.Enabled": False,
    "AutoNAT.ServiceMode": "disabled",
    "Swarm.RelayClient.Enabled": False,
    "Swarm.RelayService.Enabled": False,
    "Swarm.Transports.Network.Relay": False,
    "Swarm.Transports.Network.Websocket": False,
    "Swarm.Transports.Network.WebTransport": False,
    "Swarm.Transports.Network.WebRTCDirect": False,
    "Swarm.DisableNatPortMap": True,
    "Addresses.Announce": [],
    "Addresses.NoAnnounce": [],
}


class KuboBinaryNotFound(KuboError):
    """No Kubo ``ipfs`` binary could be found."""


class KuboStartError(KuboError):
    """A Kubo daemon did not start (the message carries the tail of its log)."""


def find_ipfs_binary() -> Path:
    """Locate the Kubo binary: ``$PROOFSWARM_IPFS_BIN``, then ``ipfs`` on PATH, then
    ``<repo>/.tools/bin/ipfs``."""
    from_env = os.environ.get("PROOFSWARM_IPFS_BIN")
    if from_env:
        path = Path(from_env)
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise KuboBinaryNotFound(f"PROOFSWARM_IPFS_BIN={from_env} is not an executable file")
    on_path = shutil.which("ipfs")
    if on_path:
        return Path(on_path)
    project_local = Path(__file__).resolve().parent.parent / ".tools" / "bin" / "ipfs"
    if project_local.is_file() and os.access(project_local, os.X_OK):
        return project_local
    raise KuboBinaryNotFound(
        "Kubo (ipfs) not found: set PROOFSWARM_IPFS_BIN, put ipfs on PATH, or run `make install`"
    )


def _multiaddr_to_url(multiaddr: str) -> str:
    parts = multiaddr.strip().split("/")
    # /ip4/127.0.0.1/tcp/5001
    if len(parts) < 5 or parts[1] not in ("ip4", "ip6", "dns", "dns4", "dns6") or parts[3] != "tcp":
        raise ValueError(f"{multiaddr!r} is not a /ip4|ip6|dns/<host>/tcp/<port> multiaddr")
    host = f"[{parts[2]}]" if parts[1] == "ip6" else parts[2]
    return f"http://{host}:{parts[4]}"


def _process_is_kubo_daemon(pid: int, repo: Path) -> bool:
    """True if ``pid`` is alive and is an ``ipfs daemon`` (guards against a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    if "\nState:\tZ" in status:
        return False
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        environ = []
    same_repo = f"IPFS_PATH={repo}".encode() in environ if environ else True
    return b"daemon" in cmdline and any(arg.endswith(b"ipfs") or b"/ipfs-" in arg for arg in cmdline) and same_repo


def _wait_for_exit(pid: int, repo: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _process_is_kubo_daemon(pid, repo):
            return True
        time.sleep(0.05)
    return not _process_is_kubo_daemon(pid, repo)


def stop_daemon(repo: Path, timeout: float = 15.0) -> bool:
    """Stop the daemon that :meth:`KuboNode.start` launched for ``repo``, from any process.

    Returns False when no daemon of ours was running there. Sends SIGTERM (Kubo then shuts
    down cleanly and releases its repo lock) and SIGKILL if it has not exited after ``timeout``.
    """
    repo = Path(repo).resolve()
    pid = _running_pid(repo)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    if not _wait_for_exit(pid, repo, timeout):
        os.kill(pid, signal.SIGKILL)
        _wait_for_exit(pid, repo, 5.0)
    (repo / PID_FILE).unlink(missing_ok=True)
    return True


def _running_pid(repo: Path) -> int | None:
    """The pid of our daemon for ``repo`` if it is running; clears a stale pid file."""
    pid_file = repo / PID_FILE
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    if not _process_is_kubo_daemon(pid, repo):
        pid_file.unlink(missing_ok=True)
        return None
    return pid


class KuboNode:
    """A running Kubo daemon with its repo in ``repo``. Create it with :meth:`start` or
    :meth:`attach`; stop it with :meth:`stop` or by leaving a ``with`` block."""

    def __init__(
        self,
        repo: Path,
        pid: int,
        api_multiaddr: str,
        gateway_multiaddr: str | None,
        peer_id: str,
        swarm_multiaddrs: list[str],
        offline: bool,
        process: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self.repo = repo
        self.pid = pid
        self.api_multiaddr = api_multiaddr
        self.gateway_multiaddr = gateway_multiaddr
        self.peer_id = peer_id
        self.swarm_multiaddrs = swarm_multiaddrs
        self.offline = offline
        self._process = process

    @property
    def api_url(self) -> str:
        """Base URL of the RPC API, e.g. ``http://127.0.0.1:40123``."""
        return _multiaddr_to_url(self.api_multiaddr)

    @property
    def gateway_url(self) -> str | None:
        """Base URL of the HTTP gateway, if the daemon runs one."""
        return _multiaddr_to_url(self.gateway_multiaddr) if self.gateway_multiaddr else None

    @classmethod
    def start(
        cls,
        repo: Path,
        *,
        offline: bool = False,
        binary: Path | None = None,
        api_port: int = 0,
        gateway_port: int = 0,
        swarm_port: int = 0,
        timeout: float = 60.0,
        api_host: str = "127.0.0.1",
        swarm_host: str = "127.0.0.1",
    ) -> Self:
        """Initialise ``repo`` if it has no Kubo repo yet, then start a daemon on it.

        Ports default to 0 (the kernel picks free ones; the chosen ones are read back from the
        daemon). ``offline`` runs without any networking: add/cat/pin work, swarm does not.
        ``api_host`` / ``swarm_host`` are the addresses the API and the swarm listen on: loopback
        unless the node is one machine of a test network on this host (bench/netns.py).
        """
        binary = Path(binary or find_ipfs_binary()).absolute()
        repo = Path(repo).resolve()
        repo.mkdir(parents=True, exist_ok=True)
        if _running_pid(repo) is not None:
            raise KuboStartError(f"a Kubo daemon is already running for {repo}; use KuboNode.attach")
        env = {**os.environ, "IPFS_PATH": str(repo), "IPFS_TELEMETRY": "off"}
        if not (repo / "config").exists():
            _run(binary, ["init", "--profile", "test", "--empty-repo"], env)
        _apply_config(repo, {
            **_PRIVATE_CONFIG,
            "Addresses.API": f"/ip4/{api_host}/tcp/{api_port}",
            "Addresses.Gateway": f"/ip4/{api_host}/tcp/{gateway_port}",
            "Addresses.Swarm": [f"/ip4/{swarm_host}/tcp/{swarm_port}"],
        })

        (repo / "api").unlink(missing_ok=True)
        log_path = repo / LOG_FILE
        args = [str(binary), "daemon", "--migrate=false"]
        if offline:
            args.append("--offline")
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                args,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        (repo / PID_FILE).write_text(f"{process.pid}\n")
        try:
            api, gateway = _wait_until_ready(process, log_path, timeout)
            node = cls(repo, process.pid, api, gateway, "", [], offline, process)
            node._refresh_identity(swarm_host)
        except BaseException:
            process.kill()
            process.wait()
            (repo / PID_FILE).unlink(missing_ok=True)
            raise
        return node

    @classmethod
    def attach(cls, repo: Path) -> Self:
        """A handle on the daemon that :meth:`start` launched for ``repo`` (maybe in another
        process). Raises :class:`KuboStartError` if none is running."""
        repo = Path(repo).resolve()
        pid = _running_pid(repo)
        if pid is None:
            raise KuboStartError(f"no Kubo daemon is running for {repo}")
        try:
            api = (repo / "api").read_text().strip()
        except OSError:
            raise KuboStartError(f"the Kubo daemon for {repo} has not published its API address") from None
        node = cls(repo, pid, api, None, "", [], offline=False)
        node._refresh_identity()
        return node

    def _refresh_identity(self, swarm_host: str = "127.0.0.1") -> None:
        try:
            response = requests.post(f"{self.api_url}/api/v0/id", timeout=10)
            response.raise_for_status()
            identity = response.json()
        except (requests.RequestException, ValueError) as exc:
            raise KuboStartError(f"Kubo for {self.repo} does not answer at {self.api_multiaddr}: {exc}") from None
        self.peer_id = identity["ID"]
        self.swarm_multiaddrs = [a for a in identity.get("Addresses") or [] if f"/{swarm_host}/" in a]

    def connect(self, other: KuboNode) -> None:
        """``swarm connect`` this node to ``other`` (both must be online)."""
        if not other.swarm_multiaddrs:
            raise KuboStartError(f"node {other.peer_id} has no swarm address (offline?)")
        response = requests.post(
            f"{self.api_url}/api/v0/swarm/connect",
            params={"arg": other.swarm_multiaddrs[0]},
            timeout=30,
        )
        if response.status_code != 200:
            raise KuboStartError(f"swarm connect to {other.peer_id} failed: {response.text.strip()}")

    def is_running(self) -> bool:
        """True while the daemon process is alive."""
        if self._process is not None:
            return self._process.poll() is None
        return _process_is_kubo_daemon(self.pid, self.repo)

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the daemon (SIGTERM, then SIGKILL after ``timeout``). Idempotent."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.terminate()
                try:
                    self._process.wait(timeout)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            (self.repo / PID_FILE).unlink(missing_ok=True)
        else:
            stop_daemon(self.repo, timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"KuboNode(repo={str(self.repo)!r}, api={self.api_multiaddr!r}, peer={self.peer_id!r})"


def _run(binary: Path, args: list[str], env: dict[str, str]) -> str:
    result = subprocess.run(
        [str(binary), *args], env=env, capture_output=True, text=True, timeout=60
    )
    if result.returncode != 0:
        raise KuboStartError(f"ipfs {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def _apply_config(repo: Path, settings: dict[str, object]) -> None:
    """Write ``settings`` (dotted keys) into the repo's JSON config, atomically."""
    config_path = repo / "config"
    config = json.loads(config_path.read_text())
    for dotted, value in settings.items():
        node = config
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    tmp = config_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(config, indent=2))
    tmp.replace(config_path)


def _wait_until_ready(
    process: subprocess.Popen[bytes], log_path: Path, timeout: float
) -> tuple[str, str | None]:
    """Wait for the daemon's ready line; return its (API, gateway) multiaddrs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = log_path.read_text(errors="replace")
        if process.poll() is not None:
            raise KuboStartError(f"Kubo daemon exited with {process.returncode}: {_tail(log)}")
        if READY_LINE in log:
            api = gateway = None
            for line in log.splitlines():
                if line.startswith("RPC API server listening on "):
                    api = line.rsplit(" ", 1)[1]
                elif line.startswith("Gateway server listening on "):
                    gateway = line.rsplit(" ", 1)[1]
            if api is None:
                raise KuboStartError(f"Kubo daemon is ready but printed no API address: {_tail(log)}")
            return api, gateway
        time.sleep(0.05)
    raise KuboStartError(f"Kubo daemon not ready after {timeout:.0f}s: {_tail(log_path.read_text(errors='replace'))}")


def _tail(log: str, lines: int = 5) -> str:
    return " | ".join(log.strip().splitlines()[-lines:])
