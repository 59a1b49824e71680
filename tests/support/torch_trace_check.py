"""Reading a trace that `sm-profiler run --torch` wrote (Chrome JSON) the way the GPU tests check
it, without sm_profiler's own readers: its torch.profiler rows, our SM processes, and the share
of each step the instrumented kernels ran, computed here from CUPTI's kernel rows alone."""

from __future__ import annotations

import gzip
import json
import re

STEP = re.compile(r"ProfilerStep#([0-9]+)\Z")
PID_BASE = 0x7000_0000  # our SM processes' ids start here (sm_profiler.export.chrome.PID_BASE)


def read_json(path) -> dict:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        return json.loads(f.read())


def processes(doc) -> dict[int, str]:
    return {
        e["pid"]: e["args"]["name"]
        for e in doc["traceEvents"]
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }


def profiler_steps(doc, pids=None) -> list[int]:
    """The ProfilerStep#N annotations (CPU side) of the trace (of processes `pids` only)."""
    return sorted(
        int(STEP.match(e["name"]).group(1))
        for e in doc["traceEvents"]
        if e.get("ph") == "X"
        and e.get("cat") not in ("kernel", "gpu_user_annotation")
        and STEP.match(str(e.get("name", "")))
        and (pids is None or e["pid"] in pids)
    )


def kernel_rows(doc, pids=None) -> list[dict]:
    """CUPTI's kernel rows (torch's, not ours: below our processes' ids)."""
    return [
        e
        for e in doc["traceEvents"]
        if e.get("ph") == "X"
        and e.get("cat") == "kernel"
        and e["pid"] < PID_BASE
        and (pids is None or e["pid"] in pids)
    ]


def our_slices(doc) -> list[dict]:
    """The slices on our `GPU r · SM s` processes (programs, and the unseen kernels' bars)."""
    sm = {p for p, n in processes(doc).items() if " · SM " in n}
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e["pid"] in sm]


def _instrumented(name: str, names) -> bool:
    return name in names or any(name.startswith(n) or n.startswith(name) for n in names)


def _union(spans) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def cupti_steps(doc, names, pids=None) -> dict[int, tuple[float, float]]:
    """{step: (instrumented µs, the step's span µs)} from CUPTI's kernel rows: a kernel belongs
    to the ProfilerStep#N window holding its launch (the cudaLaunchKernel row of its
    correlation id); a step's span runs from its first kernel's start to the next step's first
    when that step follows (never shorter than its own kernels' span), else its own kernels'."""
    ev = doc["traceEvents"]
    launch = {}
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver"):
            c = (e.get("args") or {}).get("correlation")
            if c is not None and (pids is None or e["pid"] in pids):
                launch.setdefault(c, e["ts"])
    windows: dict[int, list[float]] = {}
    for e in ev:
        m = STEP.match(str(e.get("name", "")))
        if e.get("ph") != "X" or e.get("cat") in ("kernel", "gpu_user_annotation") or not m:
            continue
        if pids is not None and e["pid"] not in pids:
            continue
        w = windows.setdefault(int(m.group(1)), [e["ts"], e["ts"] + e["dur"]])
        w[0], w[1] = min(w[0], e["ts"]), max(w[1], e["ts"] + e["dur"])
    per: dict[int, list] = {n: [] for n in windows}
    kernels = kernel_rows(doc, pids)
    for e in kernels:
        c = (e.get("args") or {}).get("correlation")
        t = launch.get(c, e["ts"])
        for n, (lo, hi) in windows.items():
            if lo <= t <= hi:
                per[n].append((e["ts"], e["ts"] + e["dur"], e["name"]))
                break
    steps = sorted(n for n in per if per[n])
    out = {}
    for i, n in enumerate(steps):
        rows = per[n]
        first = min(r[0] for r in rows)
        span = max(r[1] for r in rows) - first
        if i + 1 < len(steps) and steps[i + 1] == n + 1:
            span = max(min(r[0] for r in per[steps[i + 1]]) - first, span)
        out[n] = (_union([(a, b) for a, b, name in rows if _instrumented(name, names)]), span)
    return out


def median(values: list[float]) -> float:
    v = sorted(values)
    k = len(v)
    return v[k // 2] if k % 2 else (v[k // 2 - 1] + v[k // 2]) / 2


def report_share(text: str) -> tuple[float, int, int]:
    """(share %, steps, GPUs) of the report's 'seen, from CUPTI' line."""
    flat = " ".join(text.split())
    m = re.search(
        r"seen, from CUPTI \(torch\.profiler, median of (\d+) steps?(?: over (\d+) GPUs)?\): "
        r"instrumented kernels ran ([0-9.]+)% of a step",
        flat,
    )
    assert m, flat[-3000:]
    return float(m.group(3)), int(m.group(1)), int(m.group(2) or 1)


GEMM_WORDS = ("gemm", "nvjet", "cutlass", "xmma", "sm90", "sm80", "cublas")


def _is_gemm(name: str) -> bool:
    return any(w in name.lower() for w in GEMM_WORDS)


def check_rank_trace(doc, names, steps, gpu: int) -> None:
    """A per-process merged trace: torch's CPU ops and CUPTI kernels, ours on GPU `gpu`'s SMs."""
    assert profiler_steps(doc) == list(steps)
    assert any(e.get("cat") == "cpu_op" for e in doc["traceEvents"])  # CPU ops
    kernels = kernel_rows(doc)
    theirs = {e["name"] for e in kernels if e["name"] not in names}
    assert any(_is_gemm(n) for n in theirs), sorted(theirs)[:20]  # cuBLAS's matmuls
    assert names & {e["name"] for e in kernels}  # CUPTI saw ours too
    procs = processes(doc)
    assert any(n.startswith(f"GPU {gpu} · SM ") for n in procs.values())
    slices = our_slices(doc)
    assert names & {e["name"] for e in slices}  # our programs on the SM tracks
    assert any(_is_gemm(e["name"]) for e in slices)  # the unseen kernels drawn beside them


def cupti_share(doc, names) -> float:
    per = cupti_steps(doc, names)
    return 100 * median([inst / span for inst, span in per.values()])
