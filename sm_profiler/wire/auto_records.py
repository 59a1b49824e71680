"""Auto-mode buffers -> record rows, and rows -> launches.

`read_buffer` checks a GPU's buffer (format.py, "auto mode") and returns its written records as
columns (`ROW_COLUMNS`), with the counts its header and areas prove (claimed, kept, dropped). `split_launches`
groups rows into launches: a launch is its rows, never its grid (AutoTable, trace/auto_table.py, holds both).
"""

from __future__ import annotations

import numpy as np

from ..errors import FormatError
from . import format as fmt

LOW32 = fmt.LOW32

# One row per program (per warp at level="warp"), as read from the device, each column in the
# narrowest dtype that holds what a record can say (the table widens what it keeps: trace/auto_table.py).
ROW_COLUMNS = {
    "gpu": np.int32,
    "sm": np.uint16,  # 16 bits of the record's sm word
    "start_ns": np.int64,
    "end_ns": np.int64,
    "x": np.uint32,
    "y": np.uint16,
    "z": np.uint16,
    "warp": np.uint8,  # 7 bits
    "kernel": np.int32,  # the kernel id the host gave when it loaded the kernel
    "grid_id": np.uint32,  # the launch on its GPU: the area's number (read_buffer)
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
    """What a buffer's header says: areas, slots, ring, claimed; FormatError for a header no
    host wrote."""
    if words.size < fmt.AUTO_HEADER_WORDS:
        raise FormatError(
            f"auto buffer too short: {words.size:,} words, a header alone needs {fmt.AUTO_HEADER_WORDS:,}"
        )
    magic, version = int(words[0]) & LOW32, int(words[0]) >> 32
    if magic != fmt.AUTO_MAGIC or version != fmt.AUTO_VERSION:
        raise FormatError(
            f"not an sm_profiler auto buffer of version {fmt.AUTO_VERSION} "
            f"(magic 0x{magic:08x}, version {version})"
        )
    areas = int(words[fmt.AUTO_HDR_AREAS])
    slots_word = int(words[fmt.AUTO_HDR_SLOTS])
    if slots_word & ~(fmt.AUTO_SLOTS_MASK | fmt.AUTO_RING):
        raise FormatError(
            f"auto buffer's slots word 0x{slots_word:016x} sets unknown bits (damaged header)"
        )
    slots = slots_word & fmt.AUTO_SLOTS_MASK
    if not fmt.AUTO_MIN_CAPACITY <= slots <= fmt.AUTO_MAX_CAPACITY or areas > slots:
        raise FormatError(
            f"auto buffer names {slots:,} record slots and {areas:,} areas (damaged header)"
        )
    if words[fmt.AUTO_HDR_CLAIMED + 1 : fmt.AUTO_HEADER_WORDS].any():
        raise FormatError("auto buffer's reserved header words are not zero (damaged header)")
    need = fmt.auto_words(areas, slots)
    if words.size != need:
        raise FormatError(f"auto buffer holds {words.size:,} words; its header needs {need:,}")
    return {
        "areas": areas,
        "slots": slots,
        "ring": bool(slots_word & fmt.AUTO_RING),
        "claimed": int(words[fmt.AUTO_HDR_CLAIMED]),
    }


def read_buffer(words, gpu: int = 0, tags=None) -> tuple[dict[str, np.ndarray], dict]:
    """(the written records of its areas as ROW_COLUMNS columns, the buffer's counts) of one
    GPU's buffer. tags: kernel tag -> kernel id, as the binding gave them (a tag it does not
    name is kernel 0); each area is a launch, numbered in `grid_id`.

    Counts: claimed (records asked for while recording), capacity (slots), kept (the areas'
    slots), dropped (claimed - kept, exact), unwritten (kept slots never written: a program
    still running or killed), ring, areas."""
    words = as_words(words)
    head = read_header(words)
    n_areas, slots = head["areas"], head["slots"]
    start = fmt.AUTO_HEADER_WORDS + n_areas * fmt.AUTO_AREA_WORDS
    d = words[fmt.AUTO_HEADER_WORDS : start].reshape(-1, fmt.AUTO_AREA_WORDS)
    first = (d[:, 0] & LOW32).astype(np.int64)
    count = (d[:, 0] >> np.uint64(32)).astype(np.int64)
    step_tags, area_tags, extra = fmt.auto_label_parts(d[:, 1])
    if extra.any():
        raise FormatError("an auto area's descriptor sets unknown bits (damaged areas)")
    if (count < 1).any() or (first + count > slots).any():
        i = int(np.flatnonzero((count < 1) | (first + count > slots))[0])
        raise FormatError(
            f"auto area {i} holds slots {int(first[i]):,}..{int(first[i] + count[i]):,} of "
            f"{slots:,} (damaged areas)"
        )
    by_first = np.argsort(first, kind="stable")
    f, c = first[by_first], count[by_first]
    if len(f) > 1 and (f[1:] < f[:-1] + c[:-1]).any():
        raise FormatError("auto areas overlap (damaged areas)")
    kept = int(count.sum())
    if head["claimed"] < kept:
        raise FormatError(
            f"auto buffer claims {head['claimed']:,} records but its areas keep {kept:,} "
            "(damaged header)"
        )
    table = words[start:].view(fmt.AUTO_RECORD_DTYPE)
    # The areas' slots, in slot order, each with its area's step and tag.
    used = np.zeros(slots + 1, np.int8)
    np.add.at(used, f, 1)
    np.add.at(used, f + c, -1)
    used = np.cumsum(used[:-1], dtype=np.int8).view(bool)
    recs = table[used]
    del used
    written = recs["kernel_tag"] != 0
    area = np.repeat(by_first.astype(np.uint32), c)[written]  # each row's area (descriptor)
    n_unwritten = int(len(written) - written.sum())
    recs = recs[written]
    del written
    # Per row, its area's step tag: 16 bits where the run recorded fewer steps than that.
    small = not len(step_tags) or int(step_tags.max()) <= 0xFFFF
    step_tag = step_tags.astype(np.uint16 if small else np.uint64)[area]
    tag = area_tags.astype(np.uint8)[area]
    info = {
        "claimed": head["claimed"],
        "capacity": slots,
        "kept": kept,
        "dropped": head["claimed"] - kept,
        "unwritten": n_unwritten,
        "ring": head["ring"],
        "areas": n_areas,
    }
    rows = rows_of(recs, gpu, tags)
    rows["step_tag"], rows["tag"], rows["grid_id"] = step_tag, tag, area
    return rows, info


def rows_of(recs: np.ndarray, gpu: int = 0, tags=None) -> dict[str, np.ndarray]:
    """ROW_COLUMNS of raw device records (AUTO_RECORD_DTYPE); tags: kernel tag -> kernel id."""
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
        "warp": ((info >> 16) & fmt.AUTO_MAX_WARP).astype(np.uint8),
        "kernel": kernel_ids(recs["kernel_tag"], tags),
        "grid_id": np.zeros(len(recs), np.uint32),  # the area's (read_buffer)
        "tag": np.zeros(len(recs), np.uint8),  # the area's (read_buffer)
        "step_tag": np.zeros(len(recs), np.uint16),
        "per_warp": (info & fmt.AUTO_PER_WARP) != 0,
    }


def kernel_ids(kernel_tags: np.ndarray, tags) -> np.ndarray:
    """Kernel ids of records' kernel tags (0 where `tags` does not name one)."""
    out = np.zeros(len(kernel_tags), np.int32)
    if tags:
        known = np.array(sorted(tags), np.uint32)
        ids = np.array([tags[t] for t in known.tolist()], np.int32)
        at = np.minimum(np.searchsorted(known, kernel_tags), len(known) - 1)
        hit = known[at] == kernel_tags
        out[hit] = ids[at[hit]]
    return out


def concat_rows(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    if not parts:
        return {k: np.zeros(0, t) for k, t in ROW_COLUMNS.items()}
    # Step tags stay as wide as read_buffer made them.
    types = dict(ROW_COLUMNS, step_tag=np.result_type(*(p["step_tag"] for p in parts)))
    if len(parts) == 1:  # one GPU's rows: as they are, not copied
        return {k: parts[0][k].astype(t, copy=False) for k, t in types.items()}
    return {
        k: np.concatenate([p[k] for p in parts]).astype(t, copy=False) for k, t in types.items()
    }


def split_launches(rows: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(order, launch): `order` sorts the rows by launch, then program id (z, y, x) and warp;
    `launch[i]` is the launch of row order[i], launches numbered by their first start.

    A launch is one (GPU, grid id, kernel); read_buffer gives each area a grid id of its own, so
    there each key is one launch. Rows whose ids repeat across launches (a CUDA graph's replays
    under the %gridid of earlier formats, or rows made by hand) are split: a key in which a
    program (x, y, z, warp) recurs holds several replays. Replays of
    one node run one after another, so there a new launch begins where a program starts after
    every earlier program of the key has ended (a gap in the key's busy time). Dropped records
    (ring or limit) leave no such gap, since whole launches are dropped (a launch's area is
    kept or not); and a launch of several programs has none, since the block
    scheduler starts a waiting program as soon as one ends. What still holds a program twice
    (replays on two streams at once) is split by occurrence: the k-th record of each program
    belongs to the k-th replay."""
    n = len(rows["start_ns"])
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    start, end = rows["start_ns"], rows["end_ns"]
    key = dense_ids((rows["gpu"], rows["grid_id"], rows["kernel"]))
    prog = dense_ids((rows["x"], rows["y"], rows["z"], rows["warp"]))
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
    launch_key = dense_ids((occ, seg))
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


def dense_ids(cols: tuple) -> np.ndarray:
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
