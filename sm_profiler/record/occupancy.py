"""Does a staged lane cost the kernel a resident block? Checked on the host, once per kernel load.

A staged per-warp lane (`triton_ops.profiler_init(..., STAGE=n)`) declares its stage as static
`.shared` memory inside the ops' inline PTX. Triton's own accounting (`metadata.shared`, the
dynamic shared memory it asks for at launch) does not see it, so a kernel that already lives on
shared memory can silently lose a resident block per SM, and then run far slower than the direct
per-warp ops would (BENCHMARKS.md, Triton ops: "A stage that no longer fits"). This module
computes blocks per SM with and without the stage from the compiled kernel and the device's
limits, and the largest STAGE that keeps the count.

`install()` (called when `sm_profiler.triton_ops` is imported) adds a Triton kernel-load hook
that warns with these numbers; `stage_report()` is the pure computation behind it.
"""

from __future__ import annotations

import ctypes
import functools
import json
import re
import warnings
from dataclasses import dataclass

from ..errors import StageOccupancyWarning  # occupancy.StageOccupancyWarning, as before
from . import ptx

# The static stage the ops declare (ptx.init_staged): `.shared .align 16 .b8 smp_stage_<uid>[bytes]`.
_STAGE_DECL = re.compile(r"\.shared\s+\.align\s+\d+\s+\.b8\s+smp_stage_\w*\[(\d+)\]")
# The driver keeps this much shared memory per resident block (sm_80 and newer).
RESERVED_SMEM_PER_BLOCK_BYTES = 1024
# Registers are handed out to warps in units of this many (sm_70 and newer).
REG_ALLOC_UNIT = 256
MAX_BLOCKS_PER_SM = 32  # sm_80 .. sm_100


@dataclass(frozen=True)
class SmLimits:
    """The per-SM resources that decide how many blocks reside at once."""

    smem_per_sm_bytes: int
    max_threads_per_sm: int
    regs_per_sm: int
    max_blocks_per_sm: int = MAX_BLOCKS_PER_SM

    @classmethod
    def of_device(cls, device=None) -> SmLimits:
        import torch

        p = torch.cuda.get_device_properties(device)
        return cls(
            smem_per_sm_bytes=p.shared_memory_per_multiprocessor,
            max_threads_per_sm=p.max_threads_per_multi_processor,
            regs_per_sm=p.regs_per_multiprocessor,
        )


@dataclass(frozen=True)
class StageReport:
    kernel: str
    stage_bytes: int  # the static stage(s) the kernel declares, per block
    blocks_with_stage: int  # resident blocks per SM as compiled
    blocks_without_stage: int  # ... had the stage not been there
    fitting_stage: int  # the largest STAGE (events per warp) that keeps blocks_without_stage

    @property
    def lowers_occupancy(self) -> bool:
        return self.blocks_with_stage < self.blocks_without_stage

    def message(self) -> str:
        fix = (
            f"STAGE={self.fitting_stage} fits beside the kernel's own shared memory"
            if self.fitting_stage > 0
            else "no stage fits beside the kernel's own shared memory: use STAGE=0 "
            "(direct per-warp recording)"
        )
        return (
            f"sm_profiler: kernel {self.kernel}: the profiler's shared-memory stage "
            f"({self.stage_bytes} B per block, invisible to Triton's accounting) lowers resident "
            f"blocks per SM from {self.blocks_without_stage} to {self.blocks_with_stage}, which "
            f"slows the kernel itself; {fix}"
        )


def blocks_per_sm(threads: int, regs_per_thread: int, smem_bytes: int, limits: SmLimits) -> int:
    """Resident blocks per SM allowed by threads, registers and shared memory (0: cannot run)."""
    warps = -(-threads // 32)
    by_threads = limits.max_threads_per_sm // max(threads, 1)
    regs_per_warp = -(-regs_per_thread * 32 // REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    by_regs = limits.regs_per_sm // (regs_per_warp * warps) if regs_per_thread else by_threads
    by_smem = limits.smem_per_sm_bytes // (smem_bytes + RESERVED_SMEM_PER_BLOCK_BYTES)
    return max(0, min(limits.max_blocks_per_sm, by_threads, by_regs, by_smem))


def declared_stage_bytes(ptx_text: str) -> int:
    """Bytes of the ops' static stage(s) declared in a kernel's PTX (0: no staged lane)."""
    return sum(int(n) for n in _STAGE_DECL.findall(ptx_text))


def stage_report(
    kernel: str,
    ptx_text: str,
    shared_bytes: int,
    num_warps: int,
    regs_per_thread: int,
    limits: SmLimits,
) -> StageReport | None:
    """None if the kernel declares no stage; else blocks per SM with and without it.

    shared_bytes is what Triton counted (metadata.shared: the kernel's own dynamic shared
    memory); the stage comes on top of it."""
    stage = declared_stage_bytes(ptx_text)
    if stage == 0:
        return None
    threads = 32 * num_warps
    with_stage = blocks_per_sm(threads, regs_per_thread, shared_bytes + stage, limits)
    without = blocks_per_sm(threads, regs_per_thread, shared_bytes, limits)
    fitting = 0
    if without > 0:
        budget = limits.smem_per_sm_bytes // without - RESERVED_SMEM_PER_BLOCK_BYTES - shared_bytes
        lo, hi = 0, ptx.MAX_STAGE_BYTES // 8
        while lo < hi:  # the largest n whose stage fits the budget (stage_bytes grows with n)
            mid = (lo + hi + 1) // 2
            if ptx.stage_bytes(num_warps, mid) <= budget:
                lo = mid
            else:
                hi = mid - 1
        fitting = lo
    return StageReport(kernel, stage, with_stage, without, fitting)


# cuFuncGetAttribute's attributes (cuda.h, CUfunction_attribute).
_ATTR_STATIC_SHARED_BYTES = 1  # CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
_ATTR_NUM_REGS = 4  # CU_FUNC_ATTRIBUTE_NUM_REGS


@functools.cache
def load_libcuda():
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def _func_attribute(function: int, attribute: int) -> int | None:
    """An attribute of a loaded kernel from the driver, or None if the driver can't be asked."""
    cuda = load_libcuda()
    if cuda is None:
        return None
    try:
        value = ctypes.c_int(0)
        if cuda.cuFuncGetAttribute(ctypes.byref(value), attribute, ctypes.c_void_p(function)) == 0:
            return value.value
    except (AttributeError, TypeError):
        pass
    return None


def regs_per_thread(function: int) -> int:
    """CU_FUNC_ATTRIBUTE_NUM_REGS of a loaded kernel (0 if the driver can't be asked)."""
    return _func_attribute(function, _ATTR_NUM_REGS) or 0


def _on_kernel_load(module, function, name, metadata_group, hash):  # noqa: A002 (Triton's names)
    """Triton's kernel_load_end_hook: warn once per loaded kernel whose stage costs a block.

    Runs for every kernel the process loads, so it first asks the driver for the kernel's static
    shared memory: Triton allocates only dynamic shared memory, so 0 means no stage, and the
    kernel's files are not read."""
    if _func_attribute(function, _ATTR_STATIC_SHARED_BYTES) == 0:
        return
    try:
        paths = dict(metadata_group or {})
        ptx_path = next((p for f, p in paths.items() if f.endswith(".ptx")), None)
        json_path = next((p for f, p in paths.items() if f.endswith(".json")), None)
        if ptx_path is None or json_path is None:
            return
        with open(ptx_path) as f:
            text = f.read()
        if "smp_stage_" not in text:
            return
        with open(json_path) as f:
            meta = json.load(f)
        report = stage_report(
            name,
            text,
            int(meta.get("shared", 0)),
            int(meta["num_warps"]),
            regs_per_thread(function),
            SmLimits.of_device(),
        )
    except (OSError, ValueError, KeyError, RuntimeError):
        return  # a check that cannot run must never stop the user's launch
    if report is not None and report.lowers_occupancy:
        warnings.warn(report.message(), StageOccupancyWarning, stacklevel=2)


def install() -> None:
    """Add the check to Triton's kernel-load hooks (idempotent; Triton 3.6+ keeps a chain)."""
    try:
        import triton

        chain = triton.knobs.runtime.kernel_load_end_hook
        chain.add(_on_kernel_load)
    except (ImportError, AttributeError):
        pass
