"""Auto-mode buffers -> record rows, and rows -> launches.

`read_buffer` checks a GPU's buffer (format.py, "auto mode") and returns its written records as
columns (`ROW_COLUMNS`), with the counts its counters prove (claimed, kept, dropped). `split_launches`
groups rows into launches: a launch is its rows, never its grid (AutoTable, table.py, holds both).
"""

from __future__ import annotations

import numpy as np

from .. import format as fmt
from ..errors import FormatError

LOW32 = fmt.LOW32
# A counter above this was not counted by a GPU (2**48 programs: years of claims).
_MAX_CLAIMS = 1 << 48

# One row per program (per warp at level="warp"), as read from the device, each column in the
# narrowest dtype that holds what a record can say (the table widens what it keeps: table.py).
ROW_COLUMNS = {
    "gpu": np.int32,
    "sm": np.uint16,  # 16 bits of the record's sm word
    "start_ns": np.int64,
    "end_ns": np.int64,
    "x": np.uint32,
    "y": np.uint16,
    "z": np.uint16,
    "warp": np.uint8,  # 7 bits
    "kernel": np.int32,  # the kernel id the host gave when it loaded the module (16 bits)
    "grid_id": np.uint32,
    "tag": np.uint8,
    "step_tag": np.uint16,
    "per_warp": np.bool_,
}


def as_words(words) -> np.ndarray:
    """`words` as flat native uint64 words: a 1-D array of 64-bit (or an even number of 32-bit)
    integers, or bytes of a multiple of 8; anything else is a FormatError saying what to pass."""
    fix = "pass the buffer's words (prof.buffer_words(), a uint64 array) or its raw bytes"
    if isinstance(words, (bytes, bytearray, memoryview)):
        data = bytes(words)
        if len(data) % 8:
            raise FormatError(f"an auto buffer of {len(data):,} bytes is not whole words; {fix}")
        return np.frombuffer(data, "<u8").astype(np.uint64)
    if not isinstance(words, np.ndarray):
        raise FormatError(
            f"an auto buffer must be a numpy array or bytes, got {type(words).__name__}; {fix}"
        )
    if words.dtype.kind not in "iu" or words.dtype.itemsize not in (4, 8):
        raise FormatError(
            f"an auto buffer holds 64-bit integer words, got dtype {words.dtype}; {fix}"
        )
    flat = np.ascontiguousarray(words.reshape(-1), dtype=words.dtype.newbyteorder("<"))
    if flat.dtype.itemsize == 4 and flat.size % 2:
        raise FormatError(
            f"an auto buffer of {flat.size:,} 32-bit values is not whole words; {fix}"
        )
    return flat.view("<u8").astype(np.uint64, copy=False)


def read_header(words: np.ndarray) -> dict:
    """What a buffer's header says: regions, region_size, ring, tag, step_tag; FormatError for a
    header no device wrote."""
    if words.size < fmt.AUTO_RECORDS_WORD:
        raise FormatError(
            f"auto buffer too short: {words.size:,} words, a header alone needs {fmt.AUTO_RECORDS_WORD:,}"
        )
    magic, version = int(words[0]) & LOW32, int(words[0]) >> 32
    if magic != fmt.AUTO_MAGIC or version != fmt.AUTO_VERSION:
        raise FormatError(
            f"not an sm_profiler auto buffer of version {fmt.AUTO_VERSION} "
            f"(magic 0x{magic:08x}, version {version})"
        )
    regions = int(words[fmt.AUTO_HDR_REGIONS])
    if not 1 <= regions <= fmt.AUTO_MAX_REGIONS:
        raise FormatError(
            f"auto buffer names {regions} regions; a buffer has 1..{fmt.AUTO_MAX_REGIONS} (damaged header)"
        )
    control = int(words[fmt.AUTO_HDR_CONTROL])
    if control & ~fmt.AUTO_CONTROL_BITS:
        raise FormatError(
            f"auto buffer's control word 0x{control:016x} sets unknown bits (damaged header)"
        )
    size = (control & fmt.AUTO_SIZE_MASK) + 1
    ring = bool(control & fmt.AUTO_RING)
    if ring and size & (size - 1):
        raise FormatError(
            f"auto ring buffer with {size} records per region: not a power of two (damaged header)"
        )
    reserved = words[fmt.AUTO_HDR_CONTROL + 1 : fmt.AUTO_HEADER_WORDS]
    if reserved.any():
        raise FormatError("auto buffer's reserved header words are not zero (damaged header)")
    need = fmt.auto_words(regions, size)
    if words.size != need:
        raise FormatError(f"auto buffer holds {words.size:,} words; its header needs {need:,}")
    return {
        "regions": regions,
        "region_size": size,
        "ring": ring,
        "tag": (control >> fmt.AUTO_TAG_SHIFT) & 0xFF,
        "step_tag": control >> fmt.AUTO_STEP_SHIFT,
    }


def read_buffer(words, gpu: int = 0) -> tuple[dict[str, np.ndarray], dict]:
    """(the written records as ROW_COLUMNS columns, the buffer's counts) of one GPU's buffer.

    Counts: claimed (records the programs claimed), capacity, kept (claimed that found a slot),
    dropped (claimed - kept, exact), unwritten (kept slots never written: a program still running
    or killed), ring, regions, region_size."""
    words = as_words(words)
    head = read_header(words)
    regions, size, ring = head["regions"], head["region_size"], head["ring"]
    counters = words[fmt.AUTO_HEADER_WORDS : fmt.AUTO_RECORDS_WORD : fmt.AUTO_COUNTER_WORDS]
    if counters[regions:].any():
        raise FormatError(
            f"auto buffer counts claims past its {regions} regions (damaged counters)"
        )
    counters = counters[:regions]
    bad = np.flatnonzero(counters > np.uint64(_MAX_CLAIMS))
    if len(bad):
        r = int(bad[0])
        raise FormatError(
            f"auto buffer's region {r} counts {int(counters[r]):,} claims, more than any GPU "
            "made (damaged counters)"
        )
    claimed = counters.astype(np.int64)
    kept = np.minimum(claimed, size)
    table = words[fmt.AUTO_RECORDS_WORD :].view(fmt.AUTO_RECORD_DTYPE).reshape(regions, size)
    used = np.arange(size)[None, :] < kept[:, None]
    written = table["info"] != 0
    n_unwritten = int((used & ~written).sum())
    recs = table[used & written]  # one copy: the kept slots that were written
    del used, written
    info = {
        "claimed": int(claimed.sum()),
        "capacity": regions * size,
        "kept": int(kept.sum()),
        "dropped": int((claimed - kept).sum()),
        "unwritten": n_unwritten,
        "ring": ring,
        "regions": regions,
        "region_size": size,
    }
    return rows_of(recs, gpu), info


def rows_of(recs: np.ndarray, gpu: int = 0) -> dict[str, np.ndarray]:
    """ROW_COLUMNS of raw device records (AUTO_RECORD_DTYPE)."""
    start = recs["start_ns"].astype(np.int64)
    if len(start) and (recs["start_ns"] >= np.uint64(1 << 63)).any():
        raise FormatError("an auto record starts past 2**63 ns: damaged record")
    info = recs["info"]
    yz = recs["ctaid_yz"]
    end = (recs["end_lo"].astype(np.int64) - (start & LOW32)) & LOW32
    end += start
    return {
        "gpu": np.full(len(recs), gpu, np.int32),
        "sm": (recs["sm"] & 0xFFFF).astype(np.uint16),
        "start_ns": start,
        "end_ns": end,
        "x": recs["ctaid_x"].astype(np.uint32),
        "y": (yz & 0xFFFF).astype(np.uint16),
        "z": (yz >> 16).astype(np.uint16),
        "warp": ((info >> 16) & 0x7F).astype(np.uint8),
        "kernel": (info & 0xFFFF).astype(np.int32),
        "grid_id": recs["grid_id"].astype(np.uint32),
        "tag": (info >> 24).astype(np.uint8),
        "step_tag": (recs["sm"] >> 16).astype(np.uint16),
        "per_warp": (info & fmt.AUTO_PER_WARP) != 0,
    }


def concat_rows(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    if not parts:
        return {k: np.zeros(0, t) for k, t in ROW_COLUMNS.items()}
    if len(parts) == 1:  # one GPU's rows: as they are, not copied
        return {k: parts[0][k].astype(t, copy=False) for k, t in ROW_COLUMNS.items()}
    return {
        k: np.concatenate([p[k] for p in parts]).astype(t, copy=False)
        for k, t in ROW_COLUMNS.items()
    }


def split_launches(rows: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(order, launch): `order` sorts the rows by launch, then program id (z, y, x) and warp;
    `launch[i]` is the launch of row order[i], launches numbered by their first start.

    A launch is one (GPU, %gridid, kernel), except that a CUDA graph's replays reuse their nodes'
    grid ids: a key in which a program (x, y, z, warp) recurs holds several replays. Replays of
    one node run one after another, so there a new launch begins where a program starts after
    every earlier program of the key has ended (a gap in the key's busy time). Dropped records
    (ring or limit) leave no such gap, since an SM whose region is full records nothing more
    while the others go on; and a launch of several programs has none, since the block
    scheduler starts a waiting program as soon as one ends. What still holds a program twice
    (replays on two streams at once) is split by occurrence: the k-th record of each program
    belongs to the k-th replay."""
    n = len(rows["start_ns"])
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    start, end = rows["start_ns"], rows["end_ns"]
    key = _dense((rows["gpu"], rows["grid_id"], rows["kernel"]))
    prog = _dense((rows["x"], rows["y"], rows["z"], rows["warp"]))
    # Keys in which some program recurs: graph replays.
    o = np.lexsort((prog, key))
    ko, po = key[o], prog[o]
    del o
    dup = (ko[1:] == ko[:-1]) & (po[1:] == po[:-1])
    del po
    replayed = np.zeros(int(key.max()) + 1, bool)
    replayed[ko[1:][dup]] = True
    del ko, dup
    idt = np.int32 if n < 2**31 else np.int64  # row numbers and ids below n
    order = np.lexsort((start, key)).astype(idt, copy=False)
    k = key[order]
    del key
    first = np.ones(n, bool)
    first[1:] = k[1:] != k[:-1]
    t = start[order]
    new = _new_segments(k, t, end[order], first)  # end[order] becomes its running maximum
    new = first | (new & replayed[k])
    del k, first
    seg = np.cumsum(new, dtype=idt)
    seg -= 1
    del new
    # Within a segment, the k-th record of each program (by start) is the k-th launch.
    p = prog[order]
    del prog
    o2 = np.lexsort((t, p, seg))
    head = np.ones(n, bool)
    head[1:] = (seg[o2][1:] != seg[o2][:-1]) | (p[o2][1:] != p[o2][:-1])
    del p
    idx = np.arange(n, dtype=idt)
    occ = np.empty(n, idt)
    last_head = np.where(head, idx, 0)
    np.maximum.accumulate(last_head, out=last_head)
    occ[o2] = idx - last_head
    del last_head
    del o2, head, idx
    launch_key = _dense((occ, seg))
    del occ, seg
    # Launches numbered by their first start (ties: by key).
    first_t = np.full(int(launch_key.max()) + 1, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first_t, launch_key, t)
    rank = np.empty(len(first_t), idt)
    rank[np.lexsort((np.arange(len(first_t)), first_t))] = np.arange(len(first_t), dtype=idt)
    del first_t
    launch = rank[launch_key]
    del launch_key, rank
    # Program ids that are one value for every row order nothing: left out of the sort.
    ids = [rows[c] for c in ("warp", "x", "y", "z")]
    ids = [c[order] for c in ids if c.min() != c.max()]
    by_launch = np.lexsort((t, *ids, launch))
    del t, ids
    order = order[by_launch]
    return order, launch[by_launch]


def _dense(cols: tuple) -> np.ndarray:
    """Dense ids (0..k-1, in sorted order of the columns, the last column most significant);
    int32 below 2**31 rows."""
    n = len(cols[0])
    o = np.lexsort(cols)
    new = np.zeros(n, bool)
    new[0] = True
    for c in cols:
        s = c[o]
        new[1:] |= s[1:] != s[:-1]
    # int32 where the ids fit (the columns they key are as long as the rows).
    out = np.empty(n, np.int32 if n < 2**31 else np.int64)
    ids = np.cumsum(new, dtype=out.dtype)
    ids -= 1
    out[o] = ids
    return out


def _new_segments(group, start, end, first_of_group) -> np.ndarray:
    """Rows sorted by (group, start): True where a row starts after every earlier row of its
    group has ended. The running maximum of ends is one np.maximum.accumulate over the groups
    lifted apart (on dense ranks of the times when lifting raw times could overflow). Consumes
    `end`: an int64 array of its own (no view) holds the running maximum afterwards."""
    n = len(start)
    lo = int(min(start.min(), end.min()))
    width = int(max(start.max(), end.max())) - lo + 1
    if width * (int(group[-1]) + 2) >= 2**62:
        values, inv = np.unique(np.concatenate([start, end]), return_inverse=True)
        start, end = inv[:n].astype(np.int64), inv[n:].astype(np.int64)
        lo, width = 0, len(values) + 1
    lift = group.astype(np.int64) * width
    lift -= lo
    run = end if end.dtype == np.int64 and end.base is None else end.astype(np.int64)
    run += lift  # the ends lifted, in place where `end` is this function's own
    np.maximum.accumulate(run, out=run)
    lift += start  # the starts lifted
    new = first_of_group.copy()
    new[1:] |= lift[1:] >= run[:-1]
    return new
