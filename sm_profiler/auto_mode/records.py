"""Auto-mode records -> one Capture per kernel launch, so that every reader of captures (decode,
stats, exporters, query, merge, the CLI) reads auto mode too.

Each launch becomes an ordinary buffer (format.py): one lane per program (per warp: one per
(program, warp)), its anchor the program's start and its SM, and two records, a begin and an end
of the event that names the kernel. Programs whose records were dropped are lanes never
initialised, which the stats count.
"""

from __future__ import annotations

import numpy as np

from .. import format as fmt
from ..capture import Capture
from ..errors import FormatError

LOW32 = fmt.LOW32


def read_buffer(words: np.ndarray) -> tuple[np.ndarray, dict]:
    """(the written records, what the header and counters say) of an auto-mode buffer's words."""
    words = np.asarray(words).view(np.uint64).reshape(-1)
    if words.size < fmt.AUTO_RECORDS_WORD:
        raise FormatError(f"auto buffer too short: {words.size} words")
    magic, version = int(words[0]) & LOW32, int(words[0]) >> 32
    if magic != fmt.AUTO_MAGIC or version != fmt.AUTO_VERSION:
        raise FormatError(
            f"not an sm_profiler auto buffer of version {fmt.AUTO_VERSION} "
            f"(magic 0x{magic:08x}, version {version})"
        )
    regions = int(words[fmt.AUTO_HDR_REGIONS])
    if regions != fmt.AUTO_REGIONS:
        raise FormatError(
            f"auto buffer names {regions} regions; this reader knows {fmt.AUTO_REGIONS}"
        )
    control = int(words[fmt.AUTO_HDR_CONTROL])
    size = (control & LOW32) + 1
    ring = bool(control & fmt.AUTO_RING)
    capacity = size * regions
    if words.size != fmt.auto_words(capacity):
        raise FormatError(
            f"auto buffer holds {words.size} words; its header needs {fmt.auto_words(capacity)}"
        )
    counters = words[fmt.AUTO_HEADER_WORDS : fmt.AUTO_RECORDS_WORD : fmt.AUTO_COUNTER_WORDS]
    claimed = counters.astype(np.int64)
    table = words[fmt.AUTO_RECORDS_WORD :].view(fmt.AUTO_RECORD_DTYPE).reshape(regions, size)
    kept = np.minimum(claimed, size)  # ring or limit: this many slots of each region were written
    used = np.arange(size)[None, :] < kept[:, None]
    recs = table[used]
    written = recs["info"] != 0
    info = {
        "claimed": int(claimed.sum()),
        "capacity": capacity,
        "ring": ring,
        "dropped": int((claimed - kept).sum()),
        "unwritten": int((~written).sum()),
    }
    return recs[written], info


def end_ns(recs: np.ndarray) -> np.ndarray:
    start = recs["start_ns"].astype(np.int64)
    delta = (recs["end_lo"].astype(np.int64) - (start & LOW32)) & LOW32
    return start + delta


def launches(recs: np.ndarray) -> list[np.ndarray]:
    """Indices of `recs` per launch, launches in order of their first start.

    A launch is a (%gridid, kernel) pair, except that the replays of a CUDA graph reuse their
    kernel nodes' grid ids: there, the k-th record of each program (by start time) belongs to the
    k-th replay (replays on one stream run one after another)."""
    if len(recs) == 0:
        return []
    kid = (recs["info"] & 0xFFFF).astype(np.int64)
    key = (recs["grid_id"].astype(np.int64) << 16) | kid
    program = recs["ctaid_x"].astype(np.int64) | (recs["ctaid_yz"].astype(np.int64) << 32)
    warp = ((recs["info"] >> 16) & 0xFF).astype(np.int64)
    order = np.lexsort((recs["start_ns"], warp, program, key))
    k, p, w = key[order], program[order], warp[order]
    new = np.ones(len(order), bool)
    new[1:] = (k[1:] != k[:-1]) | (p[1:] != p[:-1]) | (w[1:] != w[:-1])
    starts = np.flatnonzero(new)
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.append(starts, len(order))))
    order2 = np.lexsort((rank, k))
    order = order[order2]
    k, rank = k[order2], rank[order2]
    cuts = np.flatnonzero((k[1:] != k[:-1]) | (rank[1:] != rank[:-1])) + 1
    groups = np.split(order, cuts)
    groups.sort(key=lambda g: int(recs["start_ns"][g].min()))
    return groups


def to_captures(
    recs: np.ndarray, info: dict, kernels: dict[int, dict], base_meta: dict | None = None
) -> list[Capture]:
    """One Capture per launch. kernels: kernel id -> metadata with at least 'name'."""
    names = _event_names(kernels, recs)
    out = []
    session = {k: info[k] for k in ("claimed", "capacity", "ring", "dropped")}
    for n, idx in enumerate(launches(recs)):
        r = recs[idx]
        kid = int(r["info"][0]) & 0xFFFF
        kmeta = dict(kernels.get(kid, {}))
        name = str(kmeta.pop("name", f"kernel {kid}"))
        per_warp = bool(int(r["info"][0]) & fmt.AUTO_PER_WARP)
        tag = int(r["info"][0]) >> 24
        x = r["ctaid_x"].astype(np.int64)
        y = (r["ctaid_yz"] & 0xFFFF).astype(np.int64)
        z = (r["ctaid_yz"] >> 16).astype(np.int64)
        grid = (int(x.max()) + 1, int(y.max()) + 1, int(z.max()) + 1)
        warp = ((r["info"] >> 16) & 0x7F).astype(np.int64)
        ng = max(int(kmeta.get("num_warps") or 0), int(warp.max()) + 1) if per_warp else 1
        nb = grid[0] * grid[1] * grid[2]
        block = x + grid[0] * (y + grid[1] * z)
        lane = block * ng + (warp if per_warp else 0)
        words = np.zeros(fmt.buffer_words(nb, ng, 2), np.uint64)
        words[: fmt.HEADER_WORDS] = fmt.encode_header(nb, ng, 2)
        lanes = words[fmt.HEADER_WORDS :].reshape(nb * ng, fmt.LANE_HEADER_WORDS + 2)
        start = r["start_ns"].astype(np.uint64)
        event = min(kid - 1, fmt.MAX_EVENT_ID) if kid > 0 else 0
        lanes[lane, 0] = start
        lanes[lane, 1] = r["sm"].astype(np.uint64)
        begin_tag = np.uint64(fmt.make_tag(event, fmt.KIND_BEGIN) << fmt.TAG_SHIFT)
        end_tag = np.uint64(fmt.make_tag(event, fmt.KIND_END) << fmt.TAG_SHIFT)
        lanes[lane, 2] = begin_tag | (start & np.uint64(LOW32))
        lanes[lane, 3] = end_tag | r["end_lo"].astype(np.uint64)
        meta = dict(base_meta or {})
        meta.update(kmeta)
        meta.update(
            auto=True,
            launch=n,
            grid=list(grid),
            grid_id=int(r["grid_id"][0]),
            programs=int(len(np.unique(block))),
            auto_session=session,
        )
        if tag:
            meta["tag"] = tag  # prof.set_tag's, when the launch was queued
        groups = _warp_names(ng, kmeta.get("partitions")) if per_warp else {}
        out.append(
            Capture(
                words=words, event_names=names, group_names=groups, kernel_name=name, metadata=meta
            )
        )
    return out


def _warp_names(num_warps: int, partitions) -> dict[int, str]:
    """'warp 5', or 'worker 0 · warp 5' in a warp-specialized kernel's partition."""
    names = {w: f"warp {w}" for w in range(num_warps)}
    for name, first, n in partitions or []:
        for w in range(int(first), min(int(first) + int(n), num_warps)):
            names[w] = f"{name} · warp {w}"
    return names


def _event_names(kernels: dict[int, dict], recs: np.ndarray) -> dict[int, str]:
    """Event id (kernel id - 1) -> kernel name, unique: a name that repeats gets ' #id'."""
    kids = sorted(set((recs["info"] & 0xFFFF).astype(np.int64).tolist()) | set(kernels))
    names: dict[int, str] = {}
    seen: set[str] = set()
    for kid in kids:
        if kid <= 0:
            continue
        event = min(kid - 1, fmt.MAX_EVENT_ID)
        if event in names:
            names[event] = "other kernels"
            continue
        name = str(kernels.get(kid, {}).get("name", f"kernel {kid}"))
        if name in seen:
            name = f"{name} #{kid}"
        seen.add(name)
        names[event] = name
    return names
