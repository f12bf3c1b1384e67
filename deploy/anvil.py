"""Starting and stopping a local `anvil` chain on a free loopback port (devnet, tests, benchmarks)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from cli.devnet import DEV_CHAIN_ID
from ledger_client.chain.errors import LedgerError

DEV_MNEMONIC = "test test test test test test test test test test test junk"
_LISTEN = re.compile(rb"Listening on 127\.0\.0\.1:(\d+)")
REPO_ROOT = Path(__file__).resolve().parent.parent


def find_anvil() -> Path:
    """The anvil binary: $PROOFSWARM_ANVIL_BIN, the project's node_modules, or PATH."""
    for candidate in (os.environ.get("PROOFSWARM_ANVIL_BIN"), REPO_ROOT / "node_modules/.bin/anvil", shutil.which("anvil")):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    raise LedgerError("anvil not found: run `make install` (it installs Foundry from the pinned npm packages)")


def dev_accounts(n: int = 10) -> list[LocalAccount]:
    """The first `n` accounts of the dev mnemonic, which anvil funds with ETH."""
    Account.enable_unaudited_hdwallet_features()
    return [Account.from_mnemonic(DEV_MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}") for i in range(n)]


@dataclass
class AnvilProcess:
    """A running anvil; `stop()` ends it."""

    pid: int
    port: int
    log_path: Path
    process: subprocess.Popen | None = None

    @property
    def rpc_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, timeout: float = 10.0) -> None:
        stop_pid(self.pid, "anvil", timeout)
        if self.process is not None:
            self.process.wait(timeout=timeout)


def start_anvil(log_path: Path, accounts: int = 10, timeout: float = 30.0, extra_args: list[str] | None = None) -> AnvilProcess:
    """Start anvil on a free loopback port in its own session, logging to `log_path`. Historical states beyond the
    ones anvil keeps in memory are dropped (`--max-persisted-states 0`): by default it writes them under
    ~/.foundry/anvil/tmp and leaves them there when it stops (673 MB for 3,000 blocks; a day of devnets, demos and
    test runs had left 61 GB, and a full disk failed CI). Only recent states are read here (a reverted
    transaction's replay at its block's parent, ledger_client/chain/tx.py)."""
    binary = find_anvil()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    args = [str(binary), "--host", "127.0.0.1", "--port", "0", "--chain-id", str(DEV_CHAIN_ID),
            "--accounts", str(accounts), "--mnemonic", DEV_MNEMONIC, "--max-persisted-states", "0",
            *(extra_args or [])]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = _LISTEN.search(log_path.read_bytes())
        if m:
            return AnvilProcess(proc.pid, int(m.group(1)), log_path, proc)
        if proc.poll() is not None:
            raise LedgerError(f"anvil exited with code {proc.returncode}; see {log_path}")
        time.sleep(0.05)
    proc.kill()
    raise LedgerError(f"anvil did not start within {timeout}s; see {log_path}")


def pid_is(pid: int, name: str) -> bool:
    """Whether `pid` is alive and its command line mentions `name` (guards against reused pids)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return name.encode() in cmdline


def stop_pid(pid: int, name: str, timeout: float = 10.0) -> bool:
    """SIGTERM (then SIGKILL) `pid` if it is still the `name` process; True if one was stopped."""
    if not pid_is(pid, name):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_is(pid, name) or _is_zombie(pid):
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    return True


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except (OSError, IndexError):
        return True
