"""A validator's state folder is one pool's and one daemon's at a time (validator/state_folder.py): another pool's
daemon would resume the first pool's cursor and skip its own submissions; two daemons would interleave journals."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from cli.errors import UsageError
from tests.support.paths import ROOT
from validator.state_folder import OWNER_FILE, FolderOwner, StateFolder, default_state_dir

POOL_1 = FolderOwner(31337, "0x" + "ab" * 20, 1)
POOL_2 = FolderOwner(31337, "0x" + "ab" * 20, 2)


def test_a_folder_is_owned_by_the_first_pool_and_refuses_another(tmp_path) -> None:
    folder = tmp_path / "state"
    StateFolder.claim(folder, POOL_1).release()
    assert json.loads((folder / OWNER_FILE).read_text())["pool_id"] == 1
    StateFolder.claim(folder, POOL_1).release()  # the same pool resumes it
    for other in (POOL_2, FolderOwner(1, POOL_1.compute_pool, 1), FolderOwner(31337, "0x" + "cd" * 20, 1)):
        with pytest.raises(UsageError, match="holds the state of pool 1 of ComputePool 0xabab.* on chain 31337"):
            StateFolder.claim(folder, other)


def test_a_folder_from_before_owners_were_recorded_is_adopted(tmp_path) -> None:
    (tmp_path / "cursor.json").write_text("{}")
    StateFolder.claim(tmp_path, POOL_2).release()
    with pytest.raises(UsageError, match="holds the state of pool 2"):
        StateFolder.claim(tmp_path, POOL_1)


def test_a_damaged_owner_file_is_refused_naming_it(tmp_path) -> None:
    (tmp_path / OWNER_FILE).write_text('{"chain_id": 1')
    with pytest.raises(UsageError, match=f"{OWNER_FILE} is damaged"):
        StateFolder.claim(tmp_path, POOL_1)


def test_a_second_daemon_is_refused_until_the_first_dies_even_by_kill_9(tmp_path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        from validator.state_folder import FolderOwner, StateFolder
        StateFolder.claim({str(tmp_path)!r}, FolderOwner(31337, {POOL_1.compute_pool!r}, 1))
        print("held", flush=True)
        sys.stdin.read()
        """)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(UsageError, match="in use by another validator daemon"):
            StateFolder.claim(tmp_path, POOL_1)
    finally:
        holder.kill()
        holder.wait(30)
    StateFolder.claim(tmp_path, POOL_1).release()


def test_the_default_folder_is_per_validator_and_pool() -> None:
    assert default_state_dir("0xAb", 1) != default_state_dir("0xAb", 2) != default_state_dir("0xCd", 2)
