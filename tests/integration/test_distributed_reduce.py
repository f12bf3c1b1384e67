"""Distributed.reduce (gloo, world size 2): the loss statistics of two ranks' shares of a batch equal the
statistics of the whole batch in one process, field by field — sums add, token means are weighted by
each share's token count, maxima and minima are the extremes over the ranks holding tokens."""

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from trainer.loss import LossConfig, LossOutput, grpo_loss, reduction_of

WORLD = 2
ROWS, T, V, BUDGET = 5, 6, 7, 40
CONFIG = LossConfig(is_weight_cap=1.5)
# rank 0 takes rows 0-3, rank 1 row 4: shares of very different token counts
SPLIT = [slice(0, 4), slice(4, 5)]


def _batch(case: str) -> dict[str, torch.Tensor]:
    """One batch, the same in every process. `case` picks where the IS weights π_prox/π_behav lie."""
    gen = torch.Generator().manual_seed(7)
    logits = torch.randn(ROWS, T, V, generator=gen)
    targets = torch.randint(0, V, (ROWS, T), generator=gen)
    mask = (torch.rand(ROWS, T, generator=gen) > 0.25).float()
    mask[4, :] = 0.0
    mask[4, :2] = 1.0  # the small share: two tokens
    advantages = torch.randn(ROWS, generator=gen)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    logp_prox = logp + 0.5 * torch.randn(ROWS, T, generator=gen)  # ratios on both sides of the clip range
    if case == "spread":  # weights on both sides of 1 and above the cap; the ranks' extremes differ
        log_w = 0.8 * torch.randn(ROWS, T, generator=gen)
    elif case == "all_above_one":  # a placeholder 1.0 would win the minimum
        log_w = 0.1 + 0.5 * torch.rand(ROWS, T, generator=gen)
    elif case == "all_below_one":  # a placeholder 1.0 would win the maximum
        log_w = -0.1 - 0.5 * torch.rand(ROWS, T, generator=gen)
    else:
        raise ValueError(case)
    return {"logits": logits, "targets": targets, "mask": mask, "advantages": advantages,
            "logp_prox": logp_prox, "logp_behav": logp_prox - log_w}


def _loss(batch: dict[str, torch.Tensor], rows: slice, mask: torch.Tensor | None = None) -> LossOutput:
    return grpo_loss(batch["logits"][rows], batch["targets"][rows], batch["mask"][rows] if mask is None else mask,
                     batch["advantages"][rows], batch["logp_behav"][rows], 1.0, BUDGET, CONFIG,
                     logp_prox=batch["logp_prox"][rows])


def _as_floats(out: LossOutput) -> dict[str, float]:
    return {f.name: float(getattr(out, f.name)) for f in dataclasses.fields(out)}


def _rank(rank: int, store: str, results: str, case: str, empty_rank: int | None) -> None:
    from trainer.distributed import Distributed

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        batch = _batch(case)
        rows = SPLIT[rank]
        mask = batch["mask"][rows]
        if rank == empty_rank:
            mask = torch.zeros_like(mask)  # a share without completion tokens
        local = _loss(batch, rows, mask)
        reduced = Distributed().reduce(local, float(mask.sum()))
        Path(results, f"rank{rank}.json").write_text(json.dumps({"local": _as_floats(local),
                                                                  "reduced": _as_floats(reduced)}))
    finally:
        dist.destroy_process_group()


def _run(tmp_path: Path, case: str, empty_rank: int | None = None) -> list[dict[str, dict[str, float]]]:
    mp.spawn(_rank, args=(str(tmp_path / "store"), str(tmp_path), case, empty_rank), nprocs=WORLD, join=True)
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)]


def test_every_loss_statistic_declares_how_it_is_reduced():
    kinds = {f.name: reduction_of(f.name) for f in dataclasses.fields(LossOutput)}
    assert set(kinds.values()) <= {"sum", "token_mean", "max", "min"}
    assert kinds["loss"] == kinds["policy_loss"] == "sum"
    assert kinds["is_weight_max"] == "max" and kinds["is_weight_min"] == "min"
    assert kinds["clipped_fraction"] == kinds["is_truncated_fraction"] == kinds["is_weight_mean"] == "token_mean"


@pytest.mark.parametrize("case", ["spread", "all_above_one", "all_below_one"])
def test_two_ranks_reduce_to_the_whole_batch_statistics(tmp_path, case):
    batch = _batch(case)
    whole = _as_floats(_loss(batch, slice(0, ROWS)))
    ranks = _run(tmp_path, case)
    for result in ranks:
        for name, value in whole.items():
            assert result["reduced"][name] == pytest.approx(value, rel=1e-6, abs=1e-9), (case, name)
    local = [r["local"] for r in ranks]
    if case == "spread":
        # the shares differ, so a plain average of the ranks' values would have been wrong
        for name in ("is_weight_max", "is_weight_min", "clipped_fraction", "is_truncated_fraction"):
            assert local[0][name] != pytest.approx(local[1][name]), name
            assert whole[name] != pytest.approx((local[0][name] + local[1][name]) / 2), name
        assert whole["is_weight_max"] > CONFIG.is_weight_cap and 0 < whole["is_truncated_fraction"] < 1
        assert 0 < whole["clipped_fraction"] < 1
    if case == "all_above_one":
        assert whole["is_weight_min"] > 1.0
    if case == "all_below_one":
        assert whole["is_weight_max"] < 1.0


@pytest.mark.parametrize("case", ["all_above_one", "all_below_one"])
def test_a_rank_without_tokens_changes_no_statistic(tmp_path, case):
    batch = _batch(case)
    alone = _as_floats(_loss(batch, SPLIT[0]))  # rank 0's share is the whole of what has tokens
    ranks = _run(tmp_path, case, empty_rank=1)
    assert ranks[1]["local"]["is_weight_max"] == ranks[1]["local"]["is_weight_min"] == 1.0  # its placeholders
    for result in ranks:
        for name, value in alone.items():
            assert result["reduced"][name] == pytest.approx(value, rel=1e-6, abs=1e-9), (case, name)
    assert math.isfinite(ranks[0]["reduced"]["is_weight_min"])
