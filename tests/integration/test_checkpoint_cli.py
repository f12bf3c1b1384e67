"""The `checkpoint` CLI against a real Kubo daemon: JSON/quiet output and one-line errors."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from deploy.checkpoint_cli import main
from deploy.kubo_node import KuboNode


def _weights(tmp_path: Path) -> Path:
    path = tmp_path / "policy.safetensors"
    save_file({"w": torch.arange(5000, dtype=torch.float32), "b": torch.ones(7)}, path)
    return path


def test_publish_then_fetch_as_json(kubo_node: KuboNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    api = kubo_node.api_multiaddr
    assert main(["publish", str(_weights(tmp_path)), "--step", "4", "--shard-mib", "0.01", "--kubo-api", api, "--json"]) == 0
    published = json.loads(capsys.readouterr().out)
    assert published["step"] == 4 and published["shards"] == 2 and published["digest"].startswith("0x")

    store = tmp_path / "store"
    assert main(["fetch", published["digest"], "--store", str(store), "--kubo-api", api, "--json"]) == 0
    fetched = json.loads(capsys.readouterr().out)
    assert fetched["manifest_cid"] == published["manifest_cid"] and fetched["downloaded"] == 2

    assert main(["fetch", published["manifest_cid"], "--store", str(store), "--kubo-api", api, "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == fetched["path"]


def test_progress_bars_go_to_stderr_and_a_table_to_stdout(
    kubo_node: KuboNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["publish", str(_weights(tmp_path)), "--step", "1", "--kubo-api", kubo_node.api_url]) == 0
    captured = capsys.readouterr()
    assert "publish" in captured.err and "files 1/1" in captured.err
    assert "manifest_cid" in captured.out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["fetch", "0x1234"], 2, "a digest is written 0x + 64 hex digits"),
        (["fetch", "not-a-cid"], 2, "CID"),
        (["publish", "/nonexistent/model", "--step", "1"], 1, "does not exist"),
        (["fetch", "0x" + "ab" * 32, "--kubo-api", "/ip4/127.0.0.1/tcp/PORT"], 1, "Kubo unreachable"),
        (["fetch", "0x" + "ab" * 32, "--kubo-api", "localhost:5001"], 1, "Kubo API address"),
    ],
)
def test_bad_input_is_one_line_and_a_nonzero_exit(
    argv: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [a.replace("PORT", str(_free_port())) for a in argv]
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err


def test_a_fetch_says_whom_it_asks_and_a_manifest_nobody_serves_is_one_line_naming_them(
    kubo_node: KuboNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 47, finding 7: `checkpoint fetch` of a digest nobody serves printed nothing for 60 s and more."""
    api = kubo_node.api_multiaddr
    assert main(["fetch", "0x" + "ab" * 32, "--kubo-api", api, "--timeout", "2", "--store", str(tmp_path)]) == 1
    said, error = capsys.readouterr().err.strip().splitlines()
    assert said.startswith(f"checkpoint fetch: asking the Kubo node at {api} ") and said.endswith(" (up to 2 s)")
    assert error.startswith("error: no manifest ") and f"within 2 s: the Kubo node at {api} " in error
    assert main(["fetch", "0x" + "ab" * 32, "--kubo-api", api, "--timeout", "2", "--store", str(tmp_path), "--json"]) == 1
    assert len(capsys.readouterr().err.strip().splitlines()) == 1  # --json: the error line alone
