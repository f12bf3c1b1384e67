"""A real production client for the suite: `geth --dev` (1 s blocks) on free loopback ports, its dev account funding
the anvil mnemonic's keys, so the project's commands run on it unchanged (TOOLCHAIN.md, "Verified in the fourth
round"; built by scripts/install_geth.sh, `make test` does it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from web3 import Web3

from deploy.anvil import stop_pid
from tests.support.paths import ROOT

GETH_VERSION = "v1.17.10"
GETH_CHAIN_ID = 1337
"""`geth --dev`'s chain id."""
_HTTP = re.compile(r"HTTP server started\s+endpoint=127\.0\.0\.1:(\d+)")


def find_geth() -> Path | None:
    """The pinned geth: $PROOFSWARM_GETH_BIN, the project's .tools/bin, or PATH (None when there is none)."""
    for candidate in (os.environ.get("PROOFSWARM_GETH_BIN"), ROOT / f".tools/bin/geth-{GETH_VERSION}",
                      shutil.which("geth")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


@dataclass
class GethDev:
    """A running `geth --dev`; `stop()` ends it."""

    process: subprocess.Popen
    port: int
    log_path: Path

    @property
    def rpc_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_pid(self.process.pid, "geth", timeout=20)
        self.process.wait(timeout=20)

    def fund(self, addresses: list[str], wei: int) -> None:
        """Send `wei` to each address from geth's unlocked dev account, and wait for every receipt."""
        w3 = Web3(Web3.HTTPProvider(self.rpc_url, request_kwargs={"timeout": 30}))
        source = w3.eth.accounts[0]
        hashes = [w3.eth.send_transaction({"from": source, "to": Web3.to_checksum_address(a), "value": wei})
                  for a in addresses]
        for h in hashes:
            assert w3.eth.wait_for_transaction_receipt(h, timeout=120)["status"] == 1


def start_geth(binary: Path, datadir: Path, log_path: Path, timeout: float = 120.0) -> GethDev:
    """`geth --dev --dev.period 1` with HTTP on a free loopback port (geth picks it: port 0, read from its log), no
    peers, no IPC. Variables named GETH_* would be read as flags: none are passed."""
    args = [str(binary), "--dev", "--dev.period", "1", "--datadir", str(datadir), "--http", "--http.addr", "127.0.0.1",
            "--http.port", "0", "--http.api", "eth,net,web3,debug,txpool", "--authrpc.addr", "127.0.0.1",
            "--authrpc.port", "0", "--ipcdisable", "--nodiscover", "--maxpeers", "0", "--port", "0", "--verbosity", "3"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GETH_")}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # start-up: no chain to wait on yet
        m = _HTTP.search(log_path.read_text(errors="replace"))
        if m:
            return GethDev(proc, int(m.group(1)), log_path)
        if proc.poll() is not None:
            raise RuntimeError(f"geth exited with code {proc.returncode}; see {log_path}")
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"geth did not serve HTTP within {timeout} s; see {log_path}")
