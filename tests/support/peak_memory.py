"""Peak resident-set growth of one call (Linux: /proc/self), for the memory-bound tests."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any, Callable


def _kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def peak_growth_mib(call: Callable[[], Any]) -> tuple[Any, float]:
    """(call's result, growth of the peak RSS during it in MiB): heap pages the allocator holds free are
    handed back first (`malloc_trim`, so reusing them counts), then VmHWM is reset to the current RSS
    (`echo 5 > /proc/self/clear_refs`) and read after the call."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")
    before = _kib("VmRSS")
    result = call()
    return result, (_kib("VmHWM") - before) / 1024
