"""The kernels of benchmarks/fix_first.py's planted defects (issue 55), their inputs and their
torch references. Every Triton kernel here takes the same work layout: program p does `count[p]`
units of work starting at unit `first[p]`, so one compiled kernel serves a defect (uneven or
too many or too few programs) and its fix (the same units spread another way) alike, and the
two compute the same output.

  chase    num_warps 1: a unit is a chain of STEPS dependent loads through a table that stays
           in L1 (a pointer chase): latency-bound, a program's time is its chains' count times
           a chain's latency whatever shares its SM (up to 32 resident a SM)
  fma      a unit is a tile of 32 x num_warps x CHAINS elements, each carried through N
           dependent FMAs (v = v * a + b): compute-bound. CONFIGS pins three residencies:
           fma16 (4 warps, 15-18 registers: 16 resident a SM, threads bind), fma4 (16 warps: 4
           resident) and fma1 (16 warps, 32 chains a thread, over 64 registers: 1 resident, the
           registers bind). A program that shares its SM with others runs several times longer
           than one nearly alone: fma16's last-wave program (one warp a sub-partition, each FMA
           waiting on the last) runs about 4x faster than a full wave's (16 warps a
           sub-partition, the FMA pipe full). The `stream` config is the same kernel at one FMA an element (x + 1), 4 warps and 4
           elements a thread (16 bytes): a unit is a tile of 512 floats read from HBM and
           written back, memory-bound: a full wave (16 resident a SM) presses on the memory's
           bandwidth, a last wave of a program or two a SM waits on its latency
  mark     one program that stores a value: the instrumented kernel that marks a step around
           the cuBLAS matmuls (auto mode cannot see inside cuBLAS; its steps need a launch of
           ours)

`Tiles(config)` holds one kernel (a JIT function of its own: launched inside an auto region it
runs its instrumented build, outside one its plain build, which the timing measures) and its
input; `variant(counts)` makes a launch function over programs with
those unit counts, `check(launch)` compares its output with torch's. `MatmulChunks` is the
cuBLAS plant: a matmul of M_total rows done in chunks of rows, small integers in and out so that
every algorithm's fp32 sums are exact.

Imported by fix_first.py (on a GPU) and by the compile test (tests/e2e/test_benchmark_fix_first.py:
every kernel for sm_90 on a CPU, and each config's residency from its registers).
"""

from __future__ import annotations

from dataclasses import dataclass

TABLE = 4096  # entries of the chase table (16 KiB: stays in L1)
STEPS = 64  # dependent loads per chain
FMA_A, FMA_B = 1.0, 1.0  # v * 1 + 1, N times: x + N exactly (integer-valued floats below 2**24)


@dataclass(frozen=True)
class Config:
    """One compiled kernel of the plants: its kernel, num_warps, elements a thread carries
    (chains), dependent FMAs per element and unit (fmas), the programs one H100/H200 SM holds
    at once (the compile test checks it from the registers), and what bounds a program."""

    name: str
    kernel: str
    num_warps: int
    chains: int = 1
    fmas: int = 0
    resident: int = 1
    bound: str = "latency"

    @property
    def block(self) -> int:
        """Elements of a unit (a tile): every thread's chains."""
        return 32 * self.num_warps * self.chains

    def constexprs(self) -> dict:
        if self.kernel == "chase":
            return {"STEPS": STEPS, "MASK": TABLE - 1}
        if self.kernel == "fma":
            return {"N": self.fmas, "BLOCK": self.block}
        return {}


CONFIGS = {
    c.name: c
    for c in (
        Config("chase", "chase", 1, resident=32, bound="latency"),
        Config("fma16", "fma", 4, fmas=1024, resident=16, bound="compute"),
        Config("fma4", "fma", 16, fmas=1024, resident=4, bound="compute"),
        Config("fma1", "fma", 16, chains=32, fmas=64, resident=1, bound="compute"),
        Config("stream", "fma", 4, chains=4, fmas=1, resident=16, bound="memory"),
        Config("mark", "mark", 1, resident=32, bound="latency"),
    )
}

# Each kernel's signature for triton.compile (the compile test; a launch infers its own).
SIGNATURES = {
    "chase": {
        "table": "*i32",
        "first": "*i32",
        "count": "*i32",
        "out": "*i32",
        "STEPS": "constexpr",
        "MASK": "constexpr",
    },
    "fma": {
        "x": "*fp32",
        "first": "*i32",
        "count": "*i32",
        "out": "*fp32",
        "a": "fp32",
        "b": "fp32",
        "N": "constexpr",
        "BLOCK": "constexpr",
    },
    "mark": {"out": "*i32", "value": "i32"},
}


def kernel(name: str):
    """A JIT function of its own of kernel `name` (chase, fma, mark): auto mode's level is part
    of Triton's compile options, so a launch inside an auto region runs an instrumented build
    and one outside it the plain build."""
    import triton
    import triton.language as tl

    if name == "chase":

        @triton.jit
        def chase_kernel(table, first, count, out, STEPS: tl.constexpr, MASK: tl.constexpr):
            p = tl.program_id(0)
            a = tl.load(first + p)
            n = tl.load(count + p)
            for c in range(a, a + n):
                idx = c & MASK
                for _ in range(STEPS):
                    idx = tl.load(table + idx)
                tl.store(out + c, idx)

        return chase_kernel
    if name == "fma":

        @triton.jit
        def fma_kernel(x, first, count, out, a, b, N: tl.constexpr, BLOCK: tl.constexpr):
            p = tl.program_id(0)
            t0 = tl.load(first + p)
            n = tl.load(count + p)
            offs = tl.arange(0, BLOCK)
            for t in range(t0, t0 + n):
                o = t.to(tl.int64) * BLOCK + offs
                v = tl.load(x + o)
                for _ in range(N):  # each FMA waits on the last: a and b are not constants
                    v = v * a + b
                tl.store(out + o, v)

        return fma_kernel
    if name == "mark":

        @triton.jit
        def mark_kernel(out, value):
            tl.store(out + tl.program_id(0), value)

        return mark_kernel
    raise ValueError(f"no plant kernel named {name!r}")


def starts(counts):
    """Each program's first unit: the counts' exclusive prefix sum."""
    out, at = [], 0
    for c in counts:
        out.append(at)
        at += c
    return out


class Tiles:
    """One config's kernel and input on the current GPU. `variant(counts)` is a launch
    function of len(counts) programs, program p doing counts[p] units; `probe(programs)` one
    whose programs all do unit 0 (to see how many reside on an SM at once)."""

    def __init__(self, config: Config, seed: int = 0):
        import torch

        self.torch = torch
        self.config = config
        self.kernel = kernel(config.kernel)
        self.gen = torch.Generator(device="cuda").manual_seed(seed)
        self.x = None  # the input, grown to the largest variant's units
        if config.kernel == "chase":
            perm = torch.randperm(TABLE, generator=torch.Generator().manual_seed(seed))
            table = torch.empty(TABLE, dtype=torch.int32)
            table[perm] = perm.roll(-1).to(torch.int32)  # one cycle through every entry
            self.table = table.cuda()

    def _input(self, units: int):
        """The float input of `units` units (integer values below 1024: x + N stays exact)."""
        torch = self.torch
        n = max(units, 1) * self.config.block
        if self.x is None or self.x.numel() < n:
            self.x = torch.randint(0, 1024, (n,), generator=self.gen, device="cuda").float()
        return self.x

    def variant(self, counts, first=None):
        torch = self.torch
        c = self.config
        counts = [int(v) for v in counts]
        first = starts(counts) if first is None else [int(v) for v in first]
        units = max((f + n for f, n in zip(first, counts, strict=True)), default=0)
        count_d = torch.tensor(counts, dtype=torch.int32, device="cuda")
        first_d = torch.tensor(first, dtype=torch.int32, device="cuda")
        grid = (len(counts),)
        k = self.kernel
        x = None
        if c.kernel == "chase":
            out = torch.full((max(units, 1),), -1, dtype=torch.int32, device="cuda")

            def launch():
                k[grid](self.table, first_d, count_d, out, num_warps=c.num_warps, **c.constexprs())

        else:
            x = self._input(units)
            out = torch.full((max(units, 1) * c.block,), -1.0, device="cuda")
            args = (x, first_d, count_d, out, FMA_A, FMA_B)

            def launch():
                k[grid](*args, num_warps=c.num_warps, **c.constexprs())

        launch.out, launch.x, launch.units, launch.programs = out, x, units, len(counts)
        return launch

    def probe(self, programs: int, units: int = 4):
        """`programs` programs of `units` units each, all the same ones (0..units-1)."""
        return self.variant([units] * programs, first=[0] * programs)

    def reference(self, launch):
        """torch's output of the launch's units (0..units-1), from the input it was given."""
        torch = self.torch
        c = self.config
        if c.kernel == "chase":
            idx = torch.arange(launch.units, device="cuda") & (TABLE - 1)
            tab = self.table.long()
            for _ in range(STEPS):
                idx = tab[idx]
            return idx.to(torch.int32)
        v = launch.x[: launch.units * c.block].clone()
        for _ in range(c.fmas):
            v = v * FMA_A + FMA_B
        return v

    def check(self, launch) -> None:
        """The launch's output equals torch's, unit for unit."""
        launch()
        n = launch.units * (1 if self.config.kernel == "chase" else self.config.block)
        got, want = launch.out[:n], self.reference(launch)
        if not self.torch.equal(got, want):
            bad = int((got != want).sum())
            raise AssertionError(f"{self.config.name} output differs from torch's in {bad} values")


class MatmulChunks:
    """C = A @ B of m_total rows, done as matmuls of `rows` rows each (cuBLAS: torch.matmul).
    A and B hold -1, 0 and 1, so that every sum is an exact integer whatever the algorithm
    (fp32 sums of integers below 2**24; bf16 values of such sums round once, the same way)."""

    def __init__(self, m_total: int, n: int, k: int, dtype: str, seed: int = 0):
        import torch

        self.torch = torch
        g = torch.Generator(device="cuda").manual_seed(seed)
        dt = getattr(torch, dtype)
        self.a = torch.randint(-1, 2, (m_total, k), generator=g, device="cuda").to(dt)
        self.b = torch.randint(-1, 2, (k, n), generator=g, device="cuda").to(dt)
        self.m_total, self.n, self.k, self.dtype = m_total, n, k, dt

    def variant(self, rows: int):
        if self.m_total % rows:
            raise ValueError(f"{rows} rows a chunk do not divide {self.m_total}")
        torch = self.torch
        out = torch.full((self.m_total, self.n), -1, dtype=self.dtype, device="cuda")
        chunks = [(i, i + rows) for i in range(0, self.m_total, rows)]

        def launch():
            for i, j in chunks:
                torch.matmul(self.a[i:j], self.b, out=out[i:j])

        launch.out, launch.rows, launch.launches = out, rows, len(chunks)
        return launch

    def check(self, launch) -> None:
        launch()
        want = (self.a.double() @ self.b.double()).to(self.dtype)
        if not self.torch.equal(launch.out, want):
            bad = int((launch.out != want).sum())
            raise AssertionError(f"matmul output differs from torch's float64 one in {bad} values")
