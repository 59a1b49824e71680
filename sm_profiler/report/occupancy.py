"""Resident blocks per SM and waves of a launch from its shape alone (issue 55): what the CUDA
occupancy calculator computes from a kernel's block size, registers per thread and shared memory
per block, against the SM's limits. The advisor uses it for the kernels auto mode cannot see
inside (cuBLAS, cuDNN, NCCL), whose grid, block, registers and shared memory torch.profiler's
CUPTI rows carry (docs/auto.md, "What to fix first").

Each limit gives the blocks it lets reside at once; the least of them is the count, and the
limit that gives it is the one that binds:

  threads         max threads per SM // threads per block
  blocks          max blocks per SM
  registers       (registers per SM // registers per warp) // warps per block, where a warp's
                  registers are registers per thread x 32 rounded up to the allocation unit
  shared memory   shared memory per SM // (shared memory per block + the reserved per block)

(record/occupancy.py computes the same count on the device side for the profiler's own stage;
the host side never imports record/, so this is its own small function.)

Layer: report (pure arithmetic; nothing above).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

WARP_THREADS = 32
LIMITS = ("threads", "blocks", "registers", "shared memory")  # ties bind in this order


@dataclass(frozen=True)
class SmLimits:
    """The per-SM resources that decide how many blocks reside at once. The defaults are H100's
    and H200's (sm_90): 2,048 threads, 32 blocks, 64K registers allocated 256 to a warp, 228 KB
    of shared memory, 1 KB of it reserved per block."""

    threads: int = 2048
    blocks: int = 32
    registers: int = 65536
    smem_bytes: int = 233472
    reg_alloc_unit: int = 256
    smem_reserved_per_block_bytes: int = 1024

    @classmethod
    def of_device_properties(cls, props: dict | None) -> tuple[SmLimits, str]:
        """The limits a torch trace's deviceProperties entry gives (maxThreadsPerMultiprocessor,
        regsPerMultiprocessor, sharedMemPerMultiprocessor), the rest H100's; and where they came
        from: 'deviceProperties' or 'H100/H200 defaults'."""
        keys = {
            "threads": "maxThreadsPerMultiprocessor",
            "registers": "regsPerMultiprocessor",
            "smem_bytes": "sharedMemPerMultiprocessor",
        }
        got = {}
        for field, key in keys.items():
            v = (props or {}).get(key)
            if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 2**31:
                got[field] = v
        return cls(**got), "deviceProperties" if got else "H100/H200 defaults"


@dataclass(frozen=True)
class Residency:
    """Resident blocks per SM (0: the block cannot run), the limit that binds, and the count
    each limit alone allows."""

    blocks: int
    binds: str
    by_limit: dict

    def occupancy(self, threads_per_block: int, limits: SmLimits) -> float:
        """Theoretical occupancy: resident warps over the SM's most."""
        warps = math.ceil(threads_per_block / WARP_THREADS)
        return self.blocks * warps / max(limits.threads // WARP_THREADS, 1)


def resident_blocks(
    threads_per_block: int,
    regs_per_thread: int,
    smem_per_block_bytes: int,
    limits: SmLimits | None = None,
) -> Residency:
    """Blocks of `threads_per_block` threads, `regs_per_thread` registers each and
    `smem_per_block_bytes` of shared memory (static and dynamic) that one SM holds at once."""
    lim = limits or SmLimits()
    threads = max(int(threads_per_block), 1)
    warps = math.ceil(threads / WARP_THREADS)
    regs_per_warp = math.ceil(max(regs_per_thread, 0) * WARP_THREADS / lim.reg_alloc_unit)
    regs_per_warp *= lim.reg_alloc_unit
    by = {
        "threads": lim.threads // threads,
        "blocks": lim.blocks,
        "registers": (lim.registers // regs_per_warp) // warps if regs_per_warp else lim.blocks,
        "shared memory": lim.smem_bytes
        // (max(smem_per_block_bytes, 0) + lim.smem_reserved_per_block_bytes),
    }
    n = max(min(by.values()), 0)
    binds = next(k for k in LIMITS if by[k] == min(by.values()))
    return Residency(n, binds, by)


def waves(blocks: int, sms: int, resident_per_sm: int) -> float:
    """Blocks over the blocks the GPU holds at once (SMs x resident per SM); 0 where none fits."""
    slots = sms * resident_per_sm
    return blocks / slots if slots > 0 else 0.0


__all__ = ["LIMITS", "Residency", "SmLimits", "resident_blocks", "waves"]
