"""Where %globaltimer sits on the host clock: measured, not assumed (GPU only).

`%globaltimer` is set from the host clock when the driver attaches the device and then runs on
its own; CUPTI (torch.profiler's CUDA rows) stamps with the host's CLOCK_REALTIME. The probe
kernel below waits, spinning on a word of pinned host memory, for the host to write a sequence
number there, and answers by writing %globaltimer into pinned memory; the host reads
CLOCK_REALTIME just before the write and just after the answer arrives. The device read lies
between the two host reads, so

    offset_ns = globaltimer - (t_before + t_after) / 2,   |error| <= (t_after - t_before) / 2

and the sample with the shortest round trip bounds the offset tightest. Two measurements some
seconds apart give the drift. `barrier_stamp` is the multi-GPU alternative: every rank stamps
%globaltimer right after an all-reduce, which finishes on all GPUs at about the same moment.
"""

from __future__ import annotations

import time

import triton
import triton.language as tl

from ..errors import DeviceError
from . import ptx

_GLOBALTIMER = tl.constexpr(ptx.GLOBALTIMER)
# A probe that hears nothing from the host for this long gives up (the host has failed).
PROBE_TIMEOUT_S = 5.0


@triton.jit
def sm_profiler_clock_probe(flag, out, n):
    # for k < n: wait until host flag >= k + 1, then out[k] = %globaltimer (pinned host memory)
    for k in range(n):
        f = tl.load(flag, volatile=True)
        while f < k + 1:
            f = tl.load(flag, volatile=True)
        t = tl.inline_asm_elementwise(_GLOBALTIMER, "=l", [], dtype=tl.int64, is_pure=False, pack=1)
        tl.store(out + k, t)


@triton.jit
def sm_profiler_stamp(out):
    t = tl.inline_asm_elementwise(_GLOBALTIMER, "=l", [], dtype=tl.int64, is_pure=False, pack=1)
    tl.store(out, t)


class _HostPointer:
    """A pinned host tensor as Triton sees a device tensor: under unified addressing the host
    address of pinned memory is also its device address."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.dtype = tensor.dtype

    def data_ptr(self) -> int:
        return self.tensor.data_ptr()


def measure_clock(device=None, samples: int = 200) -> dict:
    """One measurement of %globaltimer - CLOCK_REALTIME on `device` (default: the current one).

    Returns {"host_ns", "offset_ns", "error_ns", "rtt_min_ns", "rtt_median_ns", "samples",
    "device"}: offset from the shortest round trip, error its half-width."""
    import numpy as np
    import torch

    dev = torch.device("cuda" if device is None else device)
    with torch.cuda.device(dev):
        flag = torch.zeros(1, dtype=torch.int64).pin_memory()
        out = torch.zeros(samples, dtype=torch.int64).pin_memory()
        fnp, onp = flag.numpy(), out.numpy()
        torch.cuda.synchronize()
        sm_profiler_clock_probe[(1,)](_HostPointer(flag), _HostPointer(out), samples, num_warps=1)
        before = np.zeros(samples, np.int64)
        after = np.zeros(samples, np.int64)
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        try:
            for k in range(samples):
                before[k] = time.time_ns()
                fnp[0] = k + 1
                while onp[k] == 0:
                    if time.monotonic() > deadline:
                        raise DeviceError(
                            f"the clock probe on {dev} did not answer sample {k} within "
                            f"{PROBE_TIMEOUT_S} s (is the GPU busy with another kernel?)"
                        )
                after[k] = time.time_ns()
        finally:
            fnp[0] = samples + 1  # release the probe whatever happened
            torch.cuda.synchronize()
    rtt = after - before
    best = int(np.argmin(rtt))
    mid = before[best] + rtt[best] // 2
    return {
        "device": str(dev),
        "host_ns": int(mid),
        "offset_ns": int(onp[best] - mid),
        "error_ns": int(-(-int(rtt[best]) // 2)),
        "rtt_min_ns": int(rtt[best]),
        "rtt_median_ns": int(np.median(rtt)),
        "samples": samples,
    }


def barrier_stamp(group=None) -> int:
    """%globaltimer on this rank's GPU right after an all-reduce of every rank (torch.distributed
    must be initialised): ranks' stamps taken this way differ by the all-reduce's exit skew."""
    import torch
    import torch.distributed as dist

    x = torch.ones(1, device="cuda")
    stamp = torch.zeros(1, dtype=torch.int64, device="cuda")
    dist.barrier(group=group)
    dist.all_reduce(x, group=group)
    sm_profiler_stamp[(1,)](stamp, num_warps=1)  # queued behind the all-reduce: no host gap
    torch.cuda.synchronize()
    return int(stamp.item())


def compare_gpus(devices=None, samples: int = 200) -> dict:
    """Do the %globaltimer clocks of several GPUs agree? One probe per GPU spins on the SAME
    pinned flag; each host write releases them all at once and each stamps its own clock, so
    stamp_g - stamp_0 is the clocks' difference plus the GPUs' different delays in seeing the
    flag (a PCIe read each: the spread of the samples bounds it).

    Returns {"devices", "diff_ns": {device: {"median", "min", "max"}}} against the first device."""
    import numpy as np
    import torch

    devs = [
        torch.device(d)
        for d in (devices or [f"cuda:{i}" for i in range(torch.cuda.device_count())])
    ]
    flag = torch.zeros(1, dtype=torch.int64).pin_memory()
    outs = [torch.zeros(samples, dtype=torch.int64).pin_memory() for _ in devs]
    fnp, onps = flag.numpy(), [o.numpy() for o in outs]
    for d in devs:
        torch.cuda.synchronize(d)
    for d, o in zip(devs, outs, strict=True):
        with torch.cuda.device(d):
            sm_profiler_clock_probe[(1,)](_HostPointer(flag), _HostPointer(o), samples, num_warps=1)
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    try:
        for k in range(samples):
            fnp[0] = k + 1
            while any(o[k] == 0 for o in onps):
                if time.monotonic() > deadline:
                    raise DeviceError(
                        f"a clock probe did not answer sample {k} within {PROBE_TIMEOUT_S} s (is "
                        "a GPU busy with another kernel?)"
                    )
    finally:
        fnp[0] = samples + 1
        for d in devs:
            torch.cuda.synchronize(d)
    out = {"devices": [str(d) for d in devs], "samples": samples, "diff_ns": {}}
    for d, o in zip(devs[1:], onps[1:], strict=True):
        diff = (o - onps[0]).astype(np.int64)
        out["diff_ns"][str(d)] = {
            "median": float(np.median(diff)),
            "min": int(diff.min()),
            "max": int(diff.max()),
        }
    return out
