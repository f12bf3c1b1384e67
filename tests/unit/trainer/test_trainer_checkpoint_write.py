"""A trainer checkpoint that cannot be written (a full disk: torch's writer says "basic_ios::clear: iostream
error") is one OSError naming the step and the free space — the CLIs' one-line error — and leaves the previous
checkpoint the latest, with no staging folder behind."""

from __future__ import annotations

import pytest
import torch

from trainer.checkpoint import load_latest_checkpoint, save_checkpoint


def test_a_checkpoint_the_disk_cannot_take_is_one_error_and_the_previous_one_stays(tmp_path, monkeypatch):
    save_checkpoint(tmp_path, 1, {"w": torch.ones(2)}, {"note": "first"})

    def full_disk(*args, **kwargs):
        raise RuntimeError("basic_ios::clear: iostream error")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError, match=r"could not write the trainer checkpoint of step 2 \(\d+ MiB free on its disk\)"):
        save_checkpoint(tmp_path, 2, {"w": torch.zeros(2)}, {"note": "second"})
    monkeypatch.undo()
    latest = load_latest_checkpoint(tmp_path)
    assert latest is not None and latest.trainer["note"] == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step_000001"]
