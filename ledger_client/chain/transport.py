"""A JSON-RPC transport over one kept-alive HTTP connection per thread.

web3's HTTPProvider posts through `requests`: ~0.5 ms of client CPU a request on an idle machine, where
`http.client` on a kept-alive connection takes ~0.07 ms. A worker and a validator send ~13 requests a file each, so
on the 2 cores every role shares, that overhead was a large part of the protocol's price (docs/notes/protocol-price.md,
"Files that arrive fresh, and cheaper requests"). Errors keep `requests`' classes, so every caller sees what it saw before.
"""

from __future__ import annotations

import base64
import http.client
import os
import socket
import threading
from typing import Any
from urllib.parse import unquote, urlsplit

import requests
from web3 import HTTPProvider
from web3.types import RPCEndpoint

_STALE_CONNECTION = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError,
                     http.client.CannotSendRequest, http.client.ResponseNotReady)
"""What a kept-alive connection the node has closed raises on reuse: the request is sent again on a new one."""


class KeepAliveHTTPProvider(HTTPProvider):
    """HTTPProvider whose requests go over a kept-alive `http.client` connection (one per thread and process)."""

    def __init__(self, endpoint_uri: str, timeout: float = 10.0, **kwargs: Any) -> None:
        super().__init__(endpoint_uri, request_kwargs={"timeout": timeout}, **kwargs)
        parts = urlsplit(endpoint_uri)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"RPC URL {endpoint_uri!r} must be http(s)://host[:port][/path]")
        self._headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
        if parts.username is not None:
            credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            self._headers["Authorization"] = "Basic " + base64.b64encode(credentials).decode()
        self._connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._host = parts.hostname
        self._port = parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._timeout = timeout
        self._local = threading.local()
        self._chain_id: Any = None

    def make_request(self, method: RPCEndpoint, params: Any) -> Any:
        """As HTTPProvider's, but the chain id is asked once for the process: web3 keeps its answer per thread, and a
        worker's threads asked it again each (0.7 requests a file in bench.scale); one endpoint's id does not change."""
        if method != "eth_chainId":
            return super().make_request(method, params)
        if self._chain_id is None:
            response = super().make_request(method, params)
            if "result" not in response:
                return response
            self._chain_id = response
        return self._chain_id

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection, and whether it was used before (a fork gets a new one)."""
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == os.getpid():
            return held[1], True
        connection = self._connection_class(self._host, self._port, timeout=self._timeout)
        self._local.held = (os.getpid(), connection)
        return connection, False

    def _drop_connection(self) -> None:
        held = getattr(self._local, "held", None)
        self._local.held = None
        if held is not None and held[0] == os.getpid():
            held[1].close()

    def _post(self, request_data: bytes) -> tuple[int, str, bytes]:
        connection, reused = self._connection()
        try:
            connection.request("POST", self._path, body=request_data, headers=self._headers)
            response = connection.getresponse()
            body = response.read()
        except _STALE_CONNECTION:
            self._drop_connection()
            if not reused:
                raise
            return self._post(request_data)
        except BaseException:
            self._drop_connection()
            raise
        if response.will_close:
            self._drop_connection()
        return response.status, response.reason, body

    def _make_request(self, method: RPCEndpoint, request_data: bytes) -> bytes:
        # requests' exception classes, so every caller treats a failure as before; a request is not retried here
        # beyond one resend on a stale connection (TxSender retries what it sends)
        try:
            status, reason, body = self._post(request_data)
        except (TimeoutError, socket.timeout) as exc:
            raise requests.ReadTimeout(f"the RPC at {self.endpoint_uri} did not answer {method} in time") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise requests.ConnectionError(f"cannot reach the RPC at {self.endpoint_uri} ({exc})") from exc
        if not 200 <= status < 300:
            raise requests.HTTPError(f"{status} {reason} from the RPC at {self.endpoint_uri}")
        return body
