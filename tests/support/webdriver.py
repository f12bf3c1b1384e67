"""A minimal W3C WebDriver client over plain HTTP (chromedriver speaks JSON over HTTP), so the
browser test needs no Selenium: start chromedriver, open a session, navigate, query, screenshot."""

from __future__ import annotations

import base64
import subprocess
import time
from pathlib import Path

import requests

CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM = Path("/usr/bin/chromium")


class WebDriverError(RuntimeError):
    """chromedriver answered with an error."""


class Browser:
    """Headless Chromium driven through /usr/bin/chromedriver on `port`."""

    def __init__(self, port: int, log_path: Path):
        self.base = f"http://127.0.0.1:{port}"
        self.log = open(log_path, "wb")
        self.driver = subprocess.Popen([str(CHROMEDRIVER), f"--port={port}"], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            try:
                if requests.get(f"{self.base}/status", timeout=2).json()["value"]["ready"]:
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                self.driver.kill()
                raise WebDriverError("chromedriver did not start")
            time.sleep(0.1)
        caps = {"browserName": "chrome", "goog:chromeOptions": {
            "binary": str(CHROMIUM),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,2200"]}}
        self.session = self._send("POST", "/session", {"capabilities": {"alwaysMatch": caps}})["sessionId"]

    def _send(self, method: str, path: str, body: dict | None = None) -> dict:
        r = requests.request(method, self.base + path, json=body, timeout=60)
        value = r.json()["value"]
        if r.status_code != 200:
            raise WebDriverError(f"{method} {path}: {value.get('error')}: {value.get('message', '')[:200]}")
        return value

    def _session(self, method: str, path: str, body: dict | None = None):
        return self._send(method, f"/session/{self.session}{path}", body)

    def get(self, url: str) -> None:
        self._session("POST", "/url", {"url": url})

    def texts(self, css: str) -> list[str]:
        """Visible text of every element matching `css`, read in one script call (the page
        re-renders while it polls, so element references would go stale)."""
        return self.script("return [...document.querySelectorAll(arguments[0])].map(e => e.innerText.trim())", css)

    def script(self, js: str, *args):
        return self._session("POST", "/execute/sync", {"script": js, "args": list(args)})

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self._session("GET", "/screenshot")))

    def wait_for(self, predicate, timeout: float = 30.0, what: str = "condition"):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"the page never showed {what}")
            time.sleep(0.25)

    def close(self) -> None:
        try:
            self._send("DELETE", f"/session/{self.session}")
        finally:
            self.driver.terminate()
            self.driver.wait(10)
            self.log.close()
