"""Running the explorer: the chain indexer, the IPFS fetcher and the HTTP server, as threads."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import uvicorn

from dashboard.app import ThreadLocalExplorer, create_app
from dashboard.chain_source import Deployment, KuboClient, connect
from dashboard.indexer import ChainIndexer, ObjectFetcher
from dashboard.store import Store
from dashboard.views import Explorer, LiveChain


class ExplorerService:
    """One explorer over one deployment: `start()` indexes and serves until `stop()`."""

    def __init__(self, db_path: Path, rpc_url: str, deployment: Deployment, kubo_api: str | None,
                 host: str = "127.0.0.1", port: int = 8900, summary_path: Path | None = None, poll_s: float = 0.5):
        self.rpc_url = rpc_url
        self.w3 = connect(rpc_url, deployment.chain_id)
        self.db_path = Path(db_path)
        self.indexer = ChainIndexer(Store(self.db_path), self.w3, deployment)
        self.fetcher = ObjectFetcher(Store(self.db_path), KuboClient(kubo_api)) if kubo_api else None
        live = LiveChain(self.w3, deployment)
        self.explorer = ThreadLocalExplorer(lambda: Explorer(Store(self.db_path), live))
        self.app = create_app(self.explorer, self.indexer, self.fetcher, summary_path)
        self.host, self.port, self.poll_s = host, port, poll_s
        self.server = uvicorn.Server(uvicorn.Config(self.app, host=host, port=port, log_level="warning",
                                                    access_log=False))
        self.stop_event = threading.Event()
        self.threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> str:
        """Start indexing and serving; returns the URL once the server answers."""
        self.threads = [threading.Thread(target=self.indexer.run, args=(self.stop_event, self.poll_s),
                                         name="explorer-index", daemon=True),
                        threading.Thread(target=self.server.run, name="explorer-http", daemon=True)]
        if self.fetcher is not None:
            self.threads.append(threading.Thread(target=self.fetcher.run, args=(self.stop_event, self.poll_s),
                                                 name="explorer-ipfs", daemon=True))
        for t in self.threads:
            t.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if time.monotonic() > deadline or not self.threads[1].is_alive():
                self.stop()
                raise OSError(f"the explorer could not serve on {self.host}:{self.port}")
            time.sleep(0.05)
        return self.url

    def wait(self) -> None:
        """Block until the HTTP server ends (Ctrl-C / SIGTERM)."""
        self.threads[1].join()

    def stop(self) -> None:
        self.stop_event.set()
        self.server.should_exit = True
        for t in self.threads:
            t.join(timeout=15)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_in_background(rpc_url: str, deployment: Deployment, kubo_api: str | None, db_path: Path,
                        port: int | None = None, summary_path: Path | None = None) -> ExplorerService:
    """Start an explorer in this process (threads) on 127.0.0.1; `.url` is where it serves, `.stop()` ends it.
    For `make demo`: `service = start_in_background(...); print(service.url)`."""
    service = ExplorerService(db_path, rpc_url, deployment, kubo_api, port=port or free_port(),
                              summary_path=summary_path)
    service.start()
    return service
