"""Where and how a role computes: the `--device`, `--dtype` and `--backend` values of `worker start`,
`validator start`, `trainer start` and `validator calibrate --worker-device`, checked before anything starts.

Each check raises `ComputeChoiceError` with a one-line message naming the flag; the role CLIs turn it into
their usage error (exit code 2). Importing this module does not import torch or vLLM: `worker status` and the
other chain-only commands stay light, and vLLM is only looked for (never imported) when `--backend vllm` is
chosen.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

WORKER_DTYPES = ("float32", "bfloat16")
"""The dtypes `worker start --dtype` offers."""
BACKENDS = ("torch", "vllm")
VLLM_INSTALL_HINT = "pip install '.[vllm]'"


class ComputeChoiceError(ValueError):
    """A `--device`, `--dtype` or `--backend` value that is unknown or that this machine cannot honour."""


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of its name (float32, bfloat16, float16)."""
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


_DEVICE = re.compile(r"([a-z]+)(?::(0|[1-9][0-9]*))?")
"""What `torch.device` parses: a device type, then optionally `:` and an index."""
OTHER_TORCH_DEVICE_TYPES = frozenset({"mps", "xla", "meta", "hip", "xpu", "hpu", "ve", "ipu", "lazy", "vulkan", "fpga",
                                      "maia", "mtia", "mkldnn", "opengl", "opencl", "ideep", "privateuseone"})
"""The device types torch knows besides cpu and cuda: named, so that a device is refused without importing torch."""


def parse_device(text: str, flag: str = "--device") -> str:
    """`text` as a canonical device string ("cpu", "cuda", "cuda:1") if this machine has that device. Only a CUDA
    device imports torch (to ask it what the machine has): anything else is answered at once."""
    match = _DEVICE.fullmatch(text)
    if match is None or match[1] not in ("cpu", "cuda", *OTHER_TORCH_DEVICE_TYPES):
        raise ComputeChoiceError(f"{flag} {text!r} is not a device (cpu, cuda, cuda:N)")
    kind, index = match[1], match[2]
    if kind not in ("cpu", "cuda") or (kind == "cpu" and index not in (None, "0")):
        raise ComputeChoiceError(f"{flag} {text!r} is not a device this project runs on (cpu, cuda, cuda:N)")
    if kind == "cpu":
        return "cpu"
    import torch

    device = torch.device(text)
    if not torch.cuda.is_available():
        raise ComputeChoiceError(f"{flag} {text}: this machine has no CUDA device (torch.cuda.is_available() is "
                                 "False: no NVIDIA GPU, no driver, or a CPU-only torch build)")
    count = torch.cuda.device_count()
    if device.index is not None and device.index >= count:
        raise ComputeChoiceError(f"{flag} {text}: this machine has {count} CUDA device(s), cuda:0 … cuda:{count - 1}")
    return str(device)


def parse_dtype(text: str, allowed: tuple[str, ...] = WORKER_DTYPES, flag: str = "--dtype") -> str:
    """`text` if it names one of the `allowed` dtypes."""
    if text not in allowed:
        raise ComputeChoiceError(f"{flag} {text!r} is not one of {', '.join(allowed)}")
    return text


def require_vllm(flag: str = "--backend vllm") -> None:
    """Refuse unless vLLM is installed here (looked for, not imported)."""
    try:
        found = importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ComputeChoiceError(f"{flag}: vLLM is not installed here ({VLLM_INSTALL_HINT}, on a machine with an "
                                 "NVIDIA GPU)")


@dataclass(frozen=True)
class Compute:
    """A checked choice of engine, device and dtype."""

    backend: str = "torch"
    device: str = "cpu"
    dtype: str = "float32"

    @property
    def torch_dtype(self) -> torch.dtype:
        return torch_dtype(self.dtype)

    def describe(self) -> str:
        return f"{self.backend} on {self.device}, {self.dtype}"


def choose_compute(device: str | None, dtype: str | None = None, backend: str = "torch",
                   dtypes: tuple[str, ...] = WORKER_DTYPES) -> Compute:
    """The checked (backend, device, dtype) of a role's flags; `None` takes the default (cpu, float32).

    vLLM runs on a GPU of its own choosing (the first one CUDA_VISIBLE_DEVICES shows it): with `--backend vllm`
    the device may be left out or be `cuda`; `cpu` and `cuda:N` are refused with what to do instead."""
    if backend not in BACKENDS:
        raise ComputeChoiceError(f"--backend {backend!r} is not one of {', '.join(BACKENDS)}")
    dtype = parse_dtype(dtype if dtype is not None else "float32", dtypes)
    if backend == "vllm":
        require_vllm()
        if device not in (None, "cuda"):
            hint = (f"run it as CUDA_VISIBLE_DEVICES={device.split(':', 1)[1]} … --device cuda"
                    if device.startswith("cuda:") else "vLLM needs an NVIDIA GPU: --device cuda (or leave it out)")
            raise ComputeChoiceError(f"--backend vllm --device {device}: vLLM picks its own GPU; {hint}")
        return Compute(backend="vllm", device=parse_device("cuda"), dtype=dtype)
    return Compute(backend="torch", device=parse_device(device if device is not None else "cpu"), dtype=dtype)
