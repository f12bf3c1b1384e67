"""The kept-alive JSON-RPC transport: one connection per thread, a node-closed connection reopened, requests' errors.

The node here is a small HTTP server that counts its connections; every other test reaches anvil through the same
transport (`ledger_client.chain.ledger.connect`)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from web3 import Web3

from ledger_client.chain.transport import KeepAliveHTTPProvider


class _Node(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, close_after_each: bool = False, status: int = 200, silent: bool = False) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.close_after_each = close_after_each
        self.status = status
        self.silent = silent
        self.connections = 0
        self.requests = 0
        self.authorizations: list[str | None] = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def process_request(self, request, client_address):  # noqa: ANN001 - socketserver's signature
        self.connections += 1
        super().process_request(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keeps connections alive unless the node closes them

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        node: _Node = self.server  # type: ignore[assignment]
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        node.requests += 1
        node.authorizations.append(self.headers.get("Authorization"))
        if node.silent:
            threading.Event().wait(5)
            return
        body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": hex(node.requests)}).encode()
        self.send_response(node.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if node.close_after_each:
            # closed without a "Connection: close" header, as a node does to an idle kept-alive connection
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def node():
    server = _Node()
    yield server
    server.shutdown()
    server.server_close()


def test_requests_share_one_kept_alive_connection_per_thread(node: _Node) -> None:
    w3 = Web3(KeepAliveHTTPProvider(node.url))
    assert [w3.eth.block_number for _ in range(20)] == list(range(1, 21))
    assert node.connections == 1

    other = threading.Thread(target=lambda: [w3.eth.block_number for _ in range(5)])
    other.start()
    other.join()
    assert node.requests == 25
    assert node.connections == 2


def test_a_connection_the_node_closed_is_reopened_and_the_request_sent_again() -> None:
    node = _Node(close_after_each=True)
    try:
        w3 = Web3(KeepAliveHTTPProvider(node.url))
        assert [w3.eth.block_number for _ in range(5)] == [1, 2, 3, 4, 5]  # no request lost or sent twice
        assert node.connections == 5
    finally:
        node.shutdown()
        node.server_close()


def test_failures_raise_requests_errors_that_name_the_rpc() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(requests.ConnectionError, match=f"cannot reach the RPC at http://127.0.0.1:{port}"):
        Web3(KeepAliveHTTPProvider(f"http://127.0.0.1:{port}")).eth.block_number

    for node, error, message in ((_Node(status=503), requests.HTTPError, "503"),
                                 (_Node(silent=True), requests.ReadTimeout, "did not answer eth_blockNumber")):
        try:
            with pytest.raises(error, match=message):
                Web3(KeepAliveHTTPProvider(node.url, timeout=0.5)).eth.block_number
        finally:
            node.shutdown()
            node.server_close()


def test_credentials_in_the_url_are_sent_as_basic_auth_and_bad_urls_refused(node: _Node) -> None:
    url = node.url.replace("http://", "http://alice:s%3Acret@")
    assert Web3(KeepAliveHTTPProvider(url)).eth.block_number == 1
    assert node.authorizations == ["Basic YWxpY2U6czpjcmV0"]  # base64 of "alice:s:cret"
    with pytest.raises(ValueError, match="must be http"):
        KeepAliveHTTPProvider("ws://127.0.0.1:8545")


def test_the_chain_id_is_asked_once_for_all_threads(node: _Node) -> None:
    """web3 keeps the chain id per thread; one endpoint's id does not change, so the process asks it once."""
    w3 = Web3(KeepAliveHTTPProvider(node.url))
    ids: list[int] = []
    threads = [threading.Thread(target=lambda: ids.append(w3.eth.chain_id)) for _ in range(4)]
    for t in threads:
        t.start()
        t.join()
    assert ids == [1, 1, 1, 1] and node.requests == 1
    assert w3.eth.block_number == 2  # every other method is asked each time
