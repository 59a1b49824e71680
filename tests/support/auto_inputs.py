"""Hand-made inputs for auto mode's host tests: a kernel's PTX as Triton writes it, and program
records as the device leaves them in an auto buffer."""

from __future__ import annotations

import numpy as np

from sm_profiler.wire import format as fmt

# A kernel with a helper function, an early exit, a nested scope and a debug section; its last
# two parameters are Triton's global and profile scratch pointers.
PTX = """.version 8.7
.target sm_90a
.address_size 64

.func helper()
{
\tret;
}
.visible .entry k(
\t.param .u64 .ptr .global .align 1 k_param_0,
\t.param .u64 .ptr .global .align 1 k_param_1,
\t.param .u64 .ptr .global .align 1 k_param_2
)
.reqntid 128
{
\t.reg .pred \t%p<3>;
\t.reg .b32 \t%r<4>;
\tmov.u32 \t%r1, %ctaid.x;
\tsetp.gt.s32 \t%p1, %r1, 7;
\t@%p1 ret;
\t{ .reg .b32 tmp; mov.u32 tmp, 0; }
\tmov.b64 \t{%r2, %r3}, 0;
\tret;
}
\t.section\t.debug_abbrev
\t{
.b8 1
\t}
"""


def auto_buffer(records, capacity=256 * 16, ring=False, step_tag=0, tag=0, labels=None):
    """An auto buffer as the host reads it back after `records` (start, duration, sm, launch,
    kernel id, x, y, z) ran in this order: each run of records of one (launch, kernel) is a
    launch (a program id that recurs begins the next: a graph's replay) given its area by the
    host's allocator (areas.Areas), each record written where its program writes it
    (ptx.auto_epilogue; here in the order given). Areas record `step_tag` and `tag`, or
    labels[launch] = (step tag, tag) for that launch. The table numbers launches by their areas
    (`grid_id`), not by `launch`."""
    from sm_profiler.wire.auto_areas import Areas

    areas = Areas(capacity, ring)
    slots = np.zeros(capacity, fmt.AUTO_RECORD_DTYPE)
    runs, seen = [], set()
    for r in records:
        program = (*r[5:8], r[4] >> 16)  # (x, y, z, warp)
        if runs and runs[-1][0][3] == r[3] and runs[-1][0][4] & 0xFFFF == r[4] & 0xFFFF:
            if program not in seen:
                runs[-1].append(r)
                seen.add(program)
                continue
        runs.append([r])
        seen = {program}
    for run in runs:
        first = areas.take(len(run), *(labels or {}).get(run[0][3], (step_tag, tag)))
        if first is None:
            continue
        for i, (start, dur, sm, _, kid, x, y, z) in enumerate(run):
            # the kernel id's low 16 bits are its tag here (KERNELS has no kernel_tag); the
            # bits above go to f5 (warp, per-warp flag) as the device writes them
            tag_, info = kid & 0xFFFF, kid & ~0xFFFF
            slots[first + i] = (start, (start + dur) & fmt.LOW32, sm, tag_, info, x, y | (z << 16))
    head = areas.header_and_areas()
    return np.concatenate([head, slots.view(np.uint64)])


AUTO_T0 = 7 * 2**32 - 300  # the low word wraps inside the records


def two_kernels():
    """Program records (as auto_buffer takes them) of two kernels, numbered as in KERNELS."""
    # kernel 1: a 4-program launch (grid id 5) and the same kernel on another stream (grid id
    # 6) overlapping it; kernel 2: a 2x1x2 grid replayed twice by a CUDA graph (grid id 9).
    recs = [(AUTO_T0 + 10 * p, 500, p % 3, 5, 1, p, 0, 0) for p in range(4)]
    recs += [(AUTO_T0 + 50 + 10 * p, 400, 3, 6, 1, p, 0, 0) for p in range(4)]
    for replay in range(2):
        base = AUTO_T0 + 2000 + 1000 * replay
        recs += [
            (base + 10 * i, 300, i, 9, 2, x, 0, z)
            for i, (x, z) in enumerate([(0, 0), (1, 0), (0, 1), (1, 1)])
        ]
    return recs


# What the binding knows of each kernel id.
KERNELS = {
    1: {"name": "triton_poi_fused_add_0", "num_warps": 4, "sm_count": 4},
    2: {"name": "gemm", "num_warps": 8},
}


def table_of(records, kernels=None, sm_count=4, session=None, **buffer_options):
    """The AutoTable of one GPU's buffer holding `records` (as auto_buffer takes them);
    `session`: more of what the region knew of that GPU (step_tags, rank, clock)."""
    from sm_profiler.trace.auto_table import AutoTable

    session = {
        "gpu": 0,
        "sm_count": sm_count,
        "device_name": "test GPU",
        "rank": 0,
        **(session or {}),
    }
    words = auto_buffer(records, **buffer_options)
    return AutoTable.from_buffers([(session, words)], KERNELS if kernels is None else kernels)


def write_auto_file(path, table, columns=None, meta=None) -> None:
    """`table` saved to `path`, then its columns (name -> array, e.g. "launch_rows") and its
    JSON meta (a function of the meta dict, changed in place) replaced as a hostile file would
    hold them."""
    import io
    import json
    import zipfile

    table.save(path)
    with zipfile.ZipFile(path) as z:
        members = {n[: -len(".npy")]: np.load(io.BytesIO(z.read(n))) for n in z.namelist()}
    m = json.loads(members["meta"].tobytes())
    if meta is not None:
        meta(m)
    members["meta"] = np.frombuffer(json.dumps(m).encode(), np.uint8)
    for k, v in (columns or {}).items():  # in the member's own dtype, as a writer stores it
        members[k] = np.asarray(v).astype(members[k].dtype if k in members else np.asarray(v).dtype)
    with open(path, "wb") as f:
        np.savez(f, **members)


class TableRegion:
    """What AutoProfiler gives once its region has ended, for code that writes its outputs
    (auto_mode/script.py): a region whose records are `table`."""

    def __init__(self, table):
        self.table = table
        self.notes = []

    def captures(self):
        return self.table

    def decode(self):
        return self.table.decode()

    def save(self, path):
        self.table.save(path)


class TorchRegion(TableRegion):
    """What AutoProfiler(torch_profiler=True) gives after a region: its table and torch trace."""

    def __init__(self, table, doc):
        super().__init__(table)
        self.doc = doc

    def torch_trace(self):
        return self.doc

    def save(self, path):
        from sm_profiler.export import auto_torch_parts as torch_parts

        self.table.save(path, torch_parts.members(self.doc))

    def export(self, path):
        from sm_profiler.export import export

        return export(self.decode(), path)


def many_cells_file(path, n: int) -> None:
    """An auto file of `n` one-program launches, each on a GPU (session, rank) of its own, in a
    step of its own and of a kernel of its own: n x n (step, GPU) and (GPU, kernel) pairs could
    be, n are. Its columns and metadata are a few MiB for n = 20,000."""
    t = table_of([(AUTO_T0, 100, 0, 5, 1, 0, 0, 0)])
    i = np.arange(n, dtype=np.int64)
    start = AUTO_T0 + 1000 * i
    zero, one = np.zeros(n, np.int64), np.ones(n, np.int64)
    cols = {f"row_{k}": zero for k in ("x", "y", "z", "warp")}
    cols.update(row_launch=i, row_sm=i % 4, row_start_ns=start, row_end_ns=start + 100)
    cols.update({f"launch_{k}": zero for k in ("gpu", "tag", "per_warp")})
    cols.update({f"launch_{k}": one for k in ("rows", "grid_x", "grid_y", "grid_z")})
    cols.update(launch_session=i, launch_kernel=i, launch_grid_id=i, launch_step=i)
    cols.update(launch_first_row=i, launch_start_ns=start, launch_end_ns=start + 100)

    def meta(m):
        m["kernels"] = [{"name": f"k{j}", "num_warps": 4} for j in range(n)]
        m["sessions"] = [{"gpu": 0, "rank": j, "sm_count": 4} for j in range(n)]

    write_auto_file(path, t, columns=cols, meta=meta)


def json_bomb(inflated_bytes: int, level: int = 9):
    """The gzip (zlib level `level`) of a Chrome trace of `inflated_bytes` of empty events, a
    chunk at a time: at level 9 a 300 MiB trace is 0.3 MiB; at level 0 its stored blocks are as
    large as the trace, and as repetitive (a zip's deflate shrinks them)."""
    import zlib

    co = zlib.compressobj(level, zlib.DEFLATED, 31)
    yield co.compress(b'{"traceEvents": [')
    chunk = b"{}," * (1 << 20)
    for _ in range(max(inflated_bytes // len(chunk), 1)):
        yield co.compress(chunk)
    yield co.compress(b"{}]}")
    yield co.flush()


def save_with_member(path, table, member: str, chunks, deflate: bool = False) -> None:
    """`table` saved to `path` with one more uint8 member `member` of the bytes `chunks` yields
    (as AutoTable.save's `members` stores them), the zip entry deflated where `deflate`: a
    member a few MiB on disk may then inflate to far more."""
    import zipfile

    table.save(path)
    data = b"".join(chunks)
    header = _npy_header(len(data))
    how = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "a", compression=how) as z:
        with z.open(f"{member}.npy", "w", force_zip64=True) as m:
            m.write(header)
            m.write(data)


def _npy_header(count: int) -> bytes:
    """The .npy header of a 1-D uint8 array of `count` bytes."""
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "|u1", "fortran_order": False, "shape": (count,)}
    )
    return buf.getvalue()


def torch_doc_of(table) -> dict:
    """torch.profiler's trace of `table`'s launches as `run --torch` stores it: each launch's
    CUPTI row (named by its kernel) and cudaLaunchKernel row, a cuBLAS kernel, ProfilerStep#3
    around them, the processes and threads named and ordered (metadata events), a CPU op, a
    flow arrow and an instant."""
    from captures import cupti_doc

    names = table.kernel_names()
    L = table.launches
    rows = []
    for k, s, e in zip(L["kernel"], L["start_ns"], L["end_ns"], strict=True):
        start = int(s) - AUTO_T0 + 5000
        end = start + int(e) - int(s)
        rows.append(
            dict(name=names[int(k)], start=start, end=end, grid=(4, 1, 1), launch=start - 100)
        )
    rows.append(dict(name="nvjet_gemm", start=9000, end=9900, grid=(132, 1, 1), launch=8800))
    doc = cupti_doc(rows, steps=[(3, 4000, 12000)], base_ns=AUTO_T0 - 1_000_000, num_sms=4)

    def meta(what, pid, tid, args):
        return {"ph": "M", "name": what, "pid": pid, "tid": tid, "args": args}

    doc["traceEvents"] += [
        meta("process_name", 0, 0, {"name": "python"}),
        meta("process_name", 11, 0, {"name": "python"}),
        meta("process_sort_index", 11, 0, {"sort_index": 5}),
        meta("thread_name", 0, 7, {"name": "stream 7"}),
        meta("thread_name", 11, 11, {"name": "python main"}),
        meta("thread_sort_index", 11, 11, {"sort_index": 1}),
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 11, "tid": 11, "ts": 4.5,
         "dur": 3.0, "args": {"External id": 3}},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 100, "pid": 11, "tid": 11, "ts": 4.9},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 100, "pid": 0, "tid": 7, "ts": 5.0,
         "bp": "e"},
        {"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 11, "tid": 11, "ts": 6.0,
         "s": "t"},
    ]  # fmt: skip
    doc["distributedInfo"] = {"rank": 0, "world_size": 1}
    return doc


def job_folder(folder, ranks: int = 12, slow: int = 7, t0: int = AUTO_T0, skip=()) -> None:
    """A run's folder of `ranks` rank files (auto.rankN.npz, all but `skip`), as `sm-profiler
    run` writes them under torchrun: each rank 2 recorded steps of 3 launches of 6 programs on
    4 SMs (kernels 1 and 2 of KERNELS), launches back to back from t0; rank r's programs take
    1000 + 10 r ns, rank `slow`'s half as long again. Each rank's GPU clock is behind the host's
    by 100 r ns (its clock sample), so that ranks line up only once moved onto the host clock."""
    import os

    for r in range(ranks):
        if r in skip:
            continue
        dur = (1000 + 10 * r) * (3 if r == slow else 2) // 2
        recs, labels, t = [], {}, t0 + 100 * r  # on its GPU's clock: the host's less 100 r ns
        for launch in range(6):
            labels[launch] = (1 + launch // 3, 0)
            for p in range(6):
                # 6 programs on 4 SMs: two waves, the second on SMs 0 and 1
                recs.append(
                    (t + (p // 4) * dur, dur - 20 * (p % 3), p % 4, launch, 1 + launch % 2, p, 0, 0)
                )
            t += 2 * dur + 100
        session = {
            "rank": r,
            "world_size": ranks,
            "step_tags": {"1": 0, "2": 1},
            "clock": [{"host_ns": t0, "offset_ns": -100 * r, "error_ns": 10}],
        }
        table = table_of(recs, sm_count=4, session=session, labels=labels)
        table.metadata["job"] = {"run_id": "job57", "restart": "0", "master": "m:29500"}
        table.save(os.path.join(folder, f"auto.rank{r}.npz"))
