"""The trainer on torch.distributed: FSDP2 (or DDP) data-parallel training behind the loop's hooks.

Every rank holds the same buffer of rollout groups (rank 0 reads the work source and broadcasts
what it read), takes its contiguous share of the batch's rows, and backpropagates its share of
the loss times the world size: the loss is a sum over tokens divided by a constant token budget,
so the ranks' losses add up to the one-process loss, and the gradient averaged by FSDP2's
reduce-scatter (or DDP's all-reduce) is the one-process gradient.

- FSDP2 (`fully_shard` on every decoder layer, then on the root) shards parameters, gradients
  and AdamW state; DDP replicates them. On the CPU the process group is gloo (torch 2.15's gloo has
  every collective FSDP2 uses). On CUDA (`trainer start --device cuda --nproc N`) each rank holds
  model and batch on its own GPU, cuda:LOCAL_RANK, and the group is `cpu:gloo,cuda:nccl`: NCCL
  carries every collective on CUDA tensors (FSDP2's all-gathers and reduce-scatters, DDP's
  all-reduces), gloo the few on CPU tensors (loss statistics, objects, checkpoint planning).
- Retained policies are each rank's own FSDP2 shards (the whole parameters under DDP), in the trainer's
  `retained_dtype`: logp_behav of a past policy is recomputed by every rank together with the sharded
  model, that policy's shards written into it in place and the current ones put back after
  (trainer/loop.py). A published policy is gathered on rank 0 only, in host memory, and only rank 0
  publishes, so what goes to IPFS stays an ordinary Hugging Face safetensors checkpoint.
- Trainer checkpoints: model, optimizer and retained policies as torch.distributed.checkpoint (DCP)
  shards in `step_N/sharded/` (each rank writes its own shards), everything else (scheduler, RNG,
  buffer, source cursor) written by rank 0 in the same atomic commit as the one-process checkpoint.
  The run folder must be on storage every rank can reach.

Launch: `trainer local --nproc N` / `trainer start --nproc N` runs torch's elastic launcher (the
code behind `torchrun --standalone`) in-process, so one machine needs no extra command and the
exit code is rank 0's; across machines run `torchrun --nnodes M --nproc-per-node N -m trainer.main
local ...` directly — the ranks find their place from the environment torchrun sets.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import math
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel

from cli.errors import UsageError, exit_code_of
from trainer.checkpoint import (Checkpoint, commit_checkpoint, latest_checkpoint_folder, load_latest_checkpoint,
                                staging_folder)
from trainer.loss import LossOutput, reduction_of

T = TypeVar("T")
Strategy = Literal["fsdp", "ddp"]
SHARDED = "sharded"
POLICIES = "policies"


class FollowerExit(SystemExit):
    """A rank other than 0 stops because the group failed: it exits 0 without a word, so the
    launcher waits for rank 0, which prints the one error line and sets the exit code."""

    def __init__(self) -> None:
        super().__init__(0)


@contextmanager
def quiet_followers(is_main: bool, failures: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """On ranks other than 0, turn an error every rank meets alike (one the CLI prints as one line:
    EXIT_CODES or `failures`) into a FollowerExit; bugs still raise with their traceback."""
    try:
        yield
    except (Exception, KeyboardInterrupt) as exc:
        if is_main or exit_code_of(exc, failures) is None:
            raise
        raise FollowerExit() from None


def launched_by_torchrun() -> bool:
    """True inside a process started by torchrun (or `--nproc`) as part of a group of more than one."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def rank_device(device: str) -> str:
    """This rank's device for the role's `--device`: on CUDA in a group of more than one, one GPU per rank
    (cuda:LOCAL_RANK); otherwise `device` itself."""
    if device.startswith("cuda") and launched_by_torchrun():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return device


def process_group_backend(device: str) -> str:
    """gloo for ranks on the CPU; on CUDA NCCL for tensors on the GPU, with gloo beside it for CPU tensors."""
    return "cpu:gloo,cuda:nccl" if device.startswith("cuda") else "gloo"


class Distributed:
    """The loop's hooks (trainer/parallel.py) over an initialised default process group."""

    def __init__(self, strategy: Strategy = "fsdp", timeout_s: float = 1800.0, device: str = "cpu") -> None:
        """`device`: where this rank's model and batch live (`rank_device`); the group is initialised for it."""
        if not dist.is_initialized():
            if device.startswith("cuda"):
                torch.cuda.set_device(torch.device(device))  # NCCL and FSDP2 use the current device
            dist.init_process_group(process_group_backend(device), timeout=timedelta(seconds=timeout_s))
            atexit.register(self.close)
        self.device = torch.device(device)
        self.strategy = strategy
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def loss_scale(self) -> float:
        # FSDP2 and DDP average gradients over ranks; each local loss is a share of a sum
        return float(self.world_size)

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        if self.strategy == "ddp":
            return DistributedDataParallel(model)
        # the mesh of this rank's device type (FSDP2's default takes the machine's accelerator even when the
        # model trains on the CPU)
        mesh = init_device_mesh(self.device.type, (self.world_size,))
        for module in model.modules():
            if type(module).__name__.endswith("DecoderLayer"):
                fully_shard(module, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model

    def full_state_dict(self, model: torch.nn.Module, every_rank: bool = False) -> dict[str, torch.Tensor]:
        """The whole policy: on rank 0 only, in host memory (the others get {}), or with `every_rank` on every
        rank, on its device."""
        options = StateDictOptions(full_state_dict=True, cpu_offload=not every_rank)
        return {k: v.detach().clone() for k, v in get_model_state_dict(model, options=options).items()}

    def local_shards(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        return {name: _local(p).detach() for name, p in model.named_parameters()}

    @torch.no_grad()
    def write_local_shards(self, model: torch.nn.Module, shards: dict[str, torch.Tensor]) -> None:
        # a module FSDP2 left unsharded (the root keeps its parameters gathered after a forward pass without
        # backward) would forward its stale gathered copy: every module reshards first
        for module in model.modules():
            if isinstance(module, FSDPModule):
                module.reshard()
        for name, p in model.named_parameters():
            _local(p).copy_(shards[name])

    def rows(self, n_rows: int) -> slice:
        if n_rows < self.world_size:
            raise UsageError(f"a batch of {n_rows} rows cannot be split over {self.world_size} ranks")
        base, extra = divmod(n_rows, self.world_size)
        start = self.rank * base + min(self.rank, extra)
        return slice(start, start + base + (1 if self.rank < extra else 0))

    def reduce(self, out: LossOutput, n_tokens: float) -> LossOutput:
        """The whole batch's statistics from every rank's share (of n_tokens completion tokens), each
        field as LossOutput declares: sums add, token means are weighted by the ranks' token counts,
        maxima and minima take the extreme over the ranks that hold tokens. Two collectives."""
        names = [f.name for f in dataclasses.fields(out)]
        by = {kind: [n for n in names if reduction_of(n) == kind] for kind in ("sum", "token_mean", "max", "min")}
        local = {n: float(out.loss.detach()) if n == "loss" else float(getattr(out, n)) for n in names}
        # sums and token-weighted sums in one SUM, the token count last
        summed = torch.tensor([local[n] for n in by["sum"]] + [local[n] * n_tokens for n in by["token_mean"]]
                              + [n_tokens], dtype=torch.float64)
        dist.all_reduce(summed, op=dist.ReduceOp.SUM)
        # maxima and negated minima in one MAX; a rank without tokens has no extreme to offer
        # (its value is a placeholder), and when no rank has tokens the local placeholder stays
        held = n_tokens > 0
        extremes = torch.tensor([local[n] if held else -math.inf for n in by["max"]]
                                + [-local[n] if held else -math.inf for n in by["min"]] + [float(held)],
                                dtype=torch.float64)
        dist.all_reduce(extremes, op=dist.ReduceOp.MAX)
        sums = summed.tolist()
        total_tokens = sums[-1]
        reduced = dict(zip(by["sum"], sums, strict=False))
        weighted = sums[len(by["sum"]):-1]
        reduced |= {n: v / total_tokens if total_tokens > 0 else local[n]
                    for n, v in zip(by["token_mean"], weighted, strict=True)}
        tops = extremes.tolist()
        any_tokens = tops[-1] > 0
        reduced |= {n: v if any_tokens else local[n] for n, v in zip(by["max"], tops, strict=False)}
        reduced |= {n: -v if any_tokens else local[n]
                    for n, v in zip(by["min"], tops[len(by["max"]):-1], strict=True)}
        return dataclasses.replace(out, **{**reduced, "loss": torch.tensor(reduced["loss"])})

    def reduce_mean(self, value: float, weight: float) -> float:
        total = torch.tensor([value * weight, weight], dtype=torch.float64)
        dist.all_reduce(total)
        return float(total[0] / total[1].clamp(min=1.0))

    def clip_grad_norm(self, model: torch.nn.Module, max_norm: float) -> float:
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)

    def max_over_ranks(self, value: int) -> int:
        top = torch.tensor([value], dtype=torch.int64)
        dist.all_reduce(top, op=dist.ReduceOp.MAX)
        return int(top)

    def from_main(self, fn: Callable[[], T]) -> T:
        box: list[Any] = [None]
        if self.is_main:
            try:
                box[0] = ("ok", fn())
            except Exception as exc:  # noqa: BLE001 - every rank must leave the collective, then rank 0 raises
                box[0] = ("error", exc)
        dist.broadcast_object_list(box, src=0)
        status, value = box[0]
        if status == "error":
            if self.is_main:
                raise value
            raise FollowerExit()
        return value

    def save_checkpoint(self, root: Path, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                        tensors: dict[str, Any], trainer: dict[str, Any]) -> None:
        box = [str(staging_folder(root, step)) if self.is_main else None]
        dist.broadcast_object_list(box, src=0)
        staging = Path(box[0])
        tensors = dict(tensors)
        policies = tensors.pop("policies")
        state = self._sharded_state(model, optimizer, bool(optimizer.state))
        state[POLICIES] = {str(s): _as_parameters(model, shards) for s, shards in policies.items()}
        dcp.save(state, checkpoint_id=staging / SHARDED)
        dist.barrier()  # every rank's shards are written before rank 0 commits the folder
        if self.is_main:
            dtypes = {str(t.dtype).removeprefix("torch.") for shards in policies.values() for t in shards.values()}
            commit_checkpoint(root, step, staging, tensors, {
                **trainer, "world_size": self.world_size, "optimizer_stepped": bool(optimizer.state),
                "policy_steps": sorted(policies), "policy_dtype": dtypes.pop() if dtypes else "float32"})
        dist.barrier()

    def load_checkpoint(self, root: Path, model: torch.nn.Module,
                        optimizer: torch.optim.Optimizer) -> Checkpoint | None:
        refuse_a_one_process_checkpoint(root)
        ckpt = load_latest_checkpoint(root)
        if ckpt is None:
            return None
        assert ckpt.path is not None
        if "policy_steps" not in ckpt.trainer:
            raise UsageError(f"{ckpt.path} keeps its retained policies whole (an older trainer's); resume it with "
                             "the trainer that wrote it, or start the run afresh")
        with_optimizer = ckpt.trainer.get("optimizer_stepped", True)
        state = self._sharded_state(model, optimizer, with_optimizer)
        dtype = getattr(torch, ckpt.trainer["policy_dtype"])
        template = {name: torch.empty_like(t, dtype=dtype) for name, t in self.local_shards(model).items()}
        state[POLICIES] = {str(s): _as_parameters(model, {n: t.clone() for n, t in template.items()})
                           for s in ckpt.trainer["policy_steps"]}
        dcp.load(state, checkpoint_id=ckpt.path / SHARDED)
        set_model_state_dict(model, state["model"])
        if with_optimizer:
            set_optimizer_state_dict(model, optimizer, state["optimizer"])
        ckpt.tensors["policies"] = {int(s): {n: _local(t) for n, t in shards.items()}
                                    for s, shards in state[POLICIES].items()}
        return ckpt

    @staticmethod
    def _sharded_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, with_optimizer: bool) -> dict[str, Any]:
        """Model and optimizer state as this rank's DTensor shards. An optimizer that has not stepped
        yet is left out: DCP's state-dict helpers initialise a fresh optimizer's state by taking a
        zero-lr step, which advances AdamW's step count and would change its first real update (for
        loading, that step is harmless: the loaded state replaces it)."""
        state: dict[str, Any] = {"model": get_model_state_dict(model)}
        if with_optimizer:
            state["optimizer"] = get_optimizer_state_dict(model, optimizer)
        return state

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's piece of a parameter: a DTensor's local shard (a view of what FSDP2 trains), else the tensor."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def _as_parameters(model: torch.nn.Module, shards: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """This rank's pieces of a policy laid out as the model's parameters (DTensors of the same mesh, placement and
    shape under FSDP2), so DCP writes and reads each rank's own shards."""
    out = {}
    for name, p in model.named_parameters():
        local = shards[name]
        out[name] = (DTensor.from_local(local, p.device_mesh, p.placements, shape=p.shape, stride=p.stride(),
                                        run_check=False) if isinstance(p, DTensor) else local)
    return out


def refuse_a_one_process_checkpoint(root: Path) -> None:
    """Ranks resume only a sharded checkpoint: UsageError when the newest under `root` is a one-process one. The
    launcher asks before it starts any rank (each would import torch to give the same answer); each rank again."""
    folder = latest_checkpoint_folder(root)
    if folder is not None and not (folder / SHARDED).is_dir():
        raise UsageError(f"{folder} is a one-process checkpoint; resume it without --nproc")


def launch(nproc: int, module_argv: list[str]) -> int:
    """Run `python -m <module_argv>` as `nproc` ranks on this machine (torchrun --standalone, in-process);
    returns rank 0's exit code (or the first failing rank's when rank 0 succeeded)."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # the ranks print their own one-line errors; the launcher's per-rank failure log would repeat them
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=str(uuid.uuid4()),
                          rdzv_backend="c10d", rdzv_endpoint="127.0.0.1:0", max_restarts=0, monitor_interval=0.1)
    try:
        elastic_launch(config, sys.executable)("-m", *module_argv)
    except ChildFailedError as exc:
        codes = {rank: failure.exitcode for rank, failure in exc.failures.items()}
        return codes.get(0) or next(iter(codes.values()))
    return 0
