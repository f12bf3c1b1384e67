"""A client for a Kubo (IPFS) daemon's RPC API.

Built on ipfshttpclient 0.7.0, constructed directly (its ``connect()`` refuses Kubo >= 0.8).
The few calls it cannot serve against current Kubo go over plain HTTP POSTs to the same API;
docs/notes/ipfs.md ("ipfshttpclient") lists them and why.

Every call maps transport failures to :class:`KuboUnreachable` and daemon-side failures to
:class:`KuboError`, each with a one-line message.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import ipfshttpclient
import ipfshttpclient.exceptions as ipfs_errors
import requests
from pydantic import BaseModel

from ledger_client.ipfs.defaults import DEFAULT_API

# ipfshttpclient 0.7 passes urllib3's removed `strict` flag on every new connection pool.
warnings.filterwarnings("ignore", message="The 'strict' parameter", category=FutureWarning)

# 1 MiB blocks (the largest Kubo's bitswap moves) mean 4x fewer blocks than the 256 KiB default.
DEFAULT_CHUNKER = "size-1048576"
_STREAM_CHUNK = 1 << 20


class KuboError(RuntimeError):
    """The Kubo daemon refused or failed a request."""


class KuboUnreachable(KuboError):
    """No Kubo daemon answers at the configured API address."""


class KuboTimeout(KuboError):
    """The Kubo daemon accepted a request but did not answer in time."""


class KuboNotFound(KuboError):
    """No reachable peer provided the content in time (or, offline, it is not held locally)."""


class KuboDiskFull(KuboError):
    """The disk holding the Kubo repo is full."""


class InvalidKuboAddress(KuboError, ValueError):
    """The configured Kubo API address is neither a multiaddr nor an http:// URL."""


class KuboContentTooLarge(KuboError):
    """Content is longer than the caller's limit (streaming stopped there)."""


class PeerInfo(BaseModel):
    """What ``ipfs id`` says about a node."""

    peer_id: str
    addresses: list[str]
    agent_version: str


def api_multiaddr_of(api: str) -> str:
    """Normalise an API address given as a multiaddr or ``http://host:port`` URL to a multiaddr."""
    if api.startswith("/"):
        return api
    if api.startswith("http://"):
        host, _, port = api.removeprefix("http://").rstrip("/").rpartition(":")
        if not host or not port.isdigit():
            raise InvalidKuboAddress(f"Kubo API address {api!r} is not an http://host:port URL")
        kind = "ip6" if host.startswith("[") else ("ip4" if host.replace(".", "").isdigit() else "dns")
        return f"/{kind}/{host.strip('[]')}/tcp/{port}"
    raise InvalidKuboAddress(f"Kubo API address {api!r} is neither a multiaddr nor an http:// URL")


def _url_of(multiaddr: str) -> str:
    parts = multiaddr.split("/")
    if len(parts) < 5 or parts[1] not in ("ip4", "ip6", "dns", "dns4", "dns6") or parts[3] != "tcp":
        raise InvalidKuboAddress(f"Kubo API address {multiaddr!r} is not /ip4|ip6|dns/<host>/tcp/<port>")
    host = f"[{parts[2]}]" if parts[1] == "ip6" else parts[2]
    return f"http://{host}:{parts[4]}"


class KuboClient:
    """Talks to one Kubo daemon. Thread-safe: each thread gets its own HTTP session."""

    def __init__(self, api: str = DEFAULT_API, *, timeout: float = 60.0) -> None:
        self.api_multiaddr = api_multiaddr_of(api)
        self.api_url = _url_of(self.api_multiaddr)
        self.timeout = timeout
        self._local = threading.local()
        self._clients: list[ipfshttpclient.Client] = []
        self._lock = threading.Lock()

    # -- plumbing -----------------------------------------------------------------------------

    @property
    def _ipfs(self) -> ipfshttpclient.Client:
        client = getattr(self._local, "client", None)
        if client is None:
            try:
                client = ipfshttpclient.Client(
                    self.api_multiaddr, session=True, timeout=self.timeout, chunk_size=_STREAM_CHUNK
                )
            except ipfs_errors.AddressError as exc:
                raise InvalidKuboAddress(f"bad Kubo API address {self.api_multiaddr}: {exc}") from exc
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except (ipfs_errors.ConnectionError, requests.ConnectionError) as exc:
            raise KuboUnreachable(f"Kubo unreachable at {self.api_multiaddr} ({what})") from exc
        except (ipfs_errors.TimeoutError, requests.Timeout) as exc:
            raise KuboTimeout(f"Kubo at {self.api_multiaddr} timed out: {what}") from exc
        except ipfs_errors.ErrorResponse as exc:
            _raise_for_message(what, str(exc))
        except ipfs_errors.Error as exc:
            raise KuboError(f"{what}: {exc}") from exc

    def _post(self, path: str, args: list[str], params: dict[str, str] | None = None,
              timeout: float | None = None) -> Any:
        """A JSON RPC call over plain HTTP, for calls ipfshttpclient does not serve."""
        query: list[tuple[str, str]] = [("arg", a) for a in args] + list((params or {}).items())
        with self._errors(f"{path} {' '.join(args)}".strip()):
            response = requests.post(
                f"{self.api_url}/api/v0/{path}", params=query, timeout=timeout or self.timeout
            )
        if response.status_code != 200:
            _raise_for_rpc(f"{path} {' '.join(args)}".strip(), response)
        return response.json() if response.content else None

    def close(self) -> None:
        """Close every HTTP session this client opened."""
        with self._lock:
            for client in self._clients:
                client.close()
            self._clients.clear()
        self._local = threading.local()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- node -----------------------------------------------------------------------------------

    def version(self) -> str:
        """The daemon's Kubo version, e.g. ``0.42.0``."""
        with self._errors("version"):
            return str(self._ipfs.version()["Version"])

    def id(self) -> PeerInfo:
        """The daemon's peer id, listen addresses and agent."""
        with self._errors("id"):
            info = self._ipfs.id()
        return PeerInfo(
            peer_id=info["ID"], addresses=info.get("Addresses") or [], agent_version=info["AgentVersion"]
        )

    def swarm_connect(self, multiaddr: str) -> None:
        """Connect to a peer at ``multiaddr`` (``…/p2p/<peer id>``)."""
        with self._errors(f"swarm connect {multiaddr}"):
            self._ipfs.swarm.connect(multiaddr)

    def swarm_peers(self) -> list[str]:
        """Peer ids this node is connected to."""
        with self._errors("swarm peers"):
            peers = self._ipfs.swarm.peers().get("Peers") or []
        return [peer["Peer"] for peer in peers]

    # -- content --------------------------------------------------------------------------------

    def add_bytes(self, data: bytes, *, pin: bool = True) -> str:
        """Add ``data`` as one file; return its CIDv1 (raw-codec if it fits in one block)."""
        with self._errors("add"):
            result = self._ipfs.add(
                io.BytesIO(data), cid_version=1, raw_leaves=True, chunker=DEFAULT_CHUNKER, pin=pin
            )
        return str(result["Hash"])

    def add_file(self, path: Path, *, pin: bool = True) -> str:
        """Add the file at ``path`` (streamed, never read whole into memory); return its CIDv1."""
        with self._errors(f"add {path}"), open(path, "rb") as handle:
            result = self._ipfs.add(
                handle, cid_version=1, raw_leaves=True, chunker=DEFAULT_CHUNKER, pin=pin
            )
        return str(result["Hash"])

    def cat(self, cid: str, *, timeout: float | None = None) -> bytes:
        """The whole content of ``cid`` in memory; for small objects such as manifests."""
        with self._errors(f"cat {cid}"):
            return bytes(self._ipfs.cat(cid, opts=self._deadline(timeout), timeout=self._http_timeout(timeout)))

    def cat_to_file(
        self,
        cid: str,
        destination: Path,
        *,
        timeout: float | None = None,
        on_bytes: Callable[[int], None] | None = None,
        max_bytes: int | None = None,
    ) -> str:
        """Stream ``cid`` into ``destination`` (via a temp file renamed at the end) and return
        the sha256 hex of what was written. ``on_bytes`` is called with each chunk's size;
        more than ``max_bytes`` raises :class:`KuboContentTooLarge` and writes nothing.

        Check the length or hash: Kubo reports an error that happens mid-stream only in an HTTP
        trailer that no Python HTTP client reads, so such a stream arrives as a short file."""
        destination = Path(destination)
        destination.parent.mkdir(parents=True, exist_ok=True)
        hasher = hashlib.sha256()
        fd, tmp_name = tempfile.mkstemp(dir=destination.parent, prefix=f".{destination.name}.", suffix=".part")
        # Plain requests here: ipfshttpclient streams in whatever pieces arrive (~4 KiB), which
        # costs a third more CPU than reading 1 MiB at a time (see docs/notes/ipfs.md).
        # No Kubo deadline either: a big file on a slow link may take long; what must not last
        # is silence, so `timeout` is the longest wait for the next bytes.
        idle = timeout or self.timeout
        try:
            with os.fdopen(fd, "wb") as out, self._errors(f"cat {cid}"):
                try:
                    with requests.post(f"{self.api_url}/api/v0/cat", params={"arg": cid}, stream=True,
                                       timeout=(5.0, idle)) as response:
                        if response.status_code != 200:
                            _raise_for_rpc(f"cat {cid}", response)
                        written = 0
                        for chunk in response.iter_content(_STREAM_CHUNK):
                            written += len(chunk)
                            if max_bytes is not None and written > max_bytes:
                                raise KuboContentTooLarge(f"cat {cid}: more than {max_bytes} bytes")
                            out.write(chunk)
                            hasher.update(chunk)
                            if on_bytes is not None:
                                on_bytes(len(chunk))
                except (requests.ReadTimeout, requests.ConnectionError) as exc:
                    # a stall mid-stream surfaces as ConnectionError wrapping urllib3's ReadTimeoutError
                    if isinstance(exc, requests.ReadTimeout) or "Read timed out" in str(exc):
                        raise KuboNotFound(f"cat {cid}: no data for {idle:g}s from any reachable peer") from None
                    raise
            os.replace(tmp_name, destination)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        return hasher.hexdigest()

    def has_local(self, cid: str) -> bool:
        """True if this node holds the root block of ``cid`` without asking the network."""
        try:
            self._post("block/stat", [cid], {"offline": "true"}, timeout=10)
        except KuboUnreachable:
            raise
        except KuboError:
            return False
        return True

    def fetch_block(self, cid: str, *, timeout: float | None = None) -> int:
        """Bring block ``cid`` into this node's blockstore from whichever peer has it, without
        sending its bytes over the API; returns its size. Each call is a bitswap session of its
        own, so the block is asked of the first peer that answers it has it (not of the peer that
        served a session's earlier blocks, as within one ``cat``)."""
        reply = self._post("block/stat", [cid], self._deadline(timeout), timeout=self._http_timeout(timeout)[1])
        return int(reply["Size"])

    def links(self, cid: str, *, timeout: float | None = None) -> list[tuple[str, int]]:
        """(CID, cumulative size) of each link of the DAG node ``cid`` (fetched if not held)."""
        node = self._post("dag/get", [cid], self._deadline(timeout), timeout=self._http_timeout(timeout)[1])
        return [(link["Hash"]["/"], int(link.get("Tsize") or 0)) for link in (node or {}).get("Links") or []]

    def received_from(self, peer: str) -> int:
        """Bytes this node's bitswap has received from ``peer`` so far (its ledger)."""
        return int(self._post("bitswap/ledger", [peer])["Recv"])

    def pin_add(self, *cids: str, timeout: float | None = None) -> None:
        """Pin every one of ``cids`` recursively (fetching what is missing), in one request."""
        if not cids:
            return
        with self._errors(f"pin add {' '.join(cids)}"):
            self._ipfs.pin.add(*cids, opts=self._deadline(timeout), timeout=self._http_timeout(timeout))

    def pin_rm(self, *cids: str) -> None:
        """Unpin every one of ``cids``, in one request; not an error if some were not pinned (those are then
        unpinned one by one, as the daemon refuses the whole request)."""
        if not cids:
            return
        try:
            with self._errors(f"pin rm {' '.join(cids)}"):
                self._ipfs.pin.rm(*cids)
        except KuboError as exc:
            if "not pinned" not in str(exc):
                raise
            if len(cids) > 1:
                for cid in cids:
                    self.pin_rm(cid)

    def pin_ls(self) -> set[str]:
        """CIDs pinned recursively on this node."""
        with self._errors("pin ls"):
            keys = self._ipfs.pin.ls(type="recursive").get("Keys") or {}
        return set(keys)

    def provide(self, cid: str, *, recursive: bool = True) -> None:
        """Announce to the routing system that this node provides ``cid`` (and its blocks)."""
        self._post("routing/provide", [cid], {"recursive": str(recursive).lower()})

    def find_providers(self, cid: str, *, limit: int = 20, timeout: float = 10.0) -> set[str]:
        """Peer ids that announce ``cid`` on the DHT (as far as this node can find in ``timeout``)."""
        query = [("arg", cid), ("num-providers", str(limit)), ("timeout", f"{timeout:g}s")]
        with self._errors(f"routing findprovs {cid}"):
            response = requests.post(f"{self.api_url}/api/v0/routing/findprovs", params=query,
                                     timeout=timeout + 10)
        if response.status_code != 200:
            _raise_for_rpc(f"routing findprovs {cid}", response)
        providers: set[str] = set()
        for line in response.text.splitlines():
            event = json.loads(line)
            if event.get("Type") == 4:  # routing.Provider
                providers.update(p["ID"] for p in event.get("Responses") or [])
        return providers

    def repo_gc(self) -> None:
        """Delete unpinned blocks."""
        with self._errors("repo gc"):
            self._ipfs.repo.gc(quiet=True)

    # -- helpers --------------------------------------------------------------------------------

    def _deadline(self, timeout: float | None) -> dict[str, str]:
        # Kubo's own deadline stops a content search that no peer can answer.
        return {"timeout": f"{timeout or self.timeout:g}s"}

    def _http_timeout(self, timeout: float | None) -> tuple[float, float]:
        # connect quickly, then read for a little longer than Kubo's own deadline
        return (5.0, (timeout or self.timeout) + 10.0)


def _raise_for_rpc(what: str, response: requests.Response) -> None:
    """Raise the named error for a failed RPC response."""
    try:
        message = str(response.json().get("Message", response.text))
    except ValueError:
        message = response.text or f"HTTP {response.status_code}"
    _raise_for_message(what, message)


def _raise_for_message(what: str, message: str) -> None:
    message = " ".join(message.split())
    if "context deadline exceeded" in message:
        raise KuboNotFound(f"{what}: no reachable peer provided it in time")
    if "not found locally" in message:
        raise KuboNotFound(f"{what}: not held by this offline node")
    if "no space left on device" in message:
        raise KuboDiskFull(f"{what}: the disk of the Kubo repo is full")
    raise KuboError(f"{what}: {message}")
