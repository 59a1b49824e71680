"""fix_first's suite of planted defects (issue 55, item 4: compute- and memory-bound programs,
partial waves at several residencies, a tail from skewed work, idle SMs, host gaps, a slow rank
and a cuBLAS matmul shape of a poor wave count, each with its fix), checked without a GPU: its
kernels compile for sm_90 with the residency each case needs (plain and as auto mode
instruments them), every case runs end to end on the model of the GPU (`--dry-run`: the plant
ranked first, its fix read from the finding's evidence, the table worst case first, the JSON and
`sm-profiler diff` of a plant against its fix), and the pieces the GPU run takes from the host
(the plants' work, the matmul shapes chosen from a sweep of CUPTI's launch shapes) on inputs
made by hand. tests/device/test_fix_first_gpu.py runs the cases on a GPU."""

from __future__ import annotations

import json
import math

import pytest
from compile_probes import run_probe

from benchmarks import fix_first as ff
from benchmarks import plant_kernels as pk
from sm_profiler.report.occupancy import SmLimits

H200_SMS = 132
UNIT_CASES = ("fma_wave16", "fma_wave4", "fma_wave1", "mem_wave", "fma_tail", "mem_tail")
UNIT_CASES += ("fma_idle",)
UNIT_CASES += ("wave", "skew", "few")


# -- the kernels compile, with the residency each case plants at (slow: conftest.SLOW) ---------


@pytest.fixture(scope="module")
def compiled():
    return run_probe("plant_compile_probe.py")


def test_every_plant_kernel_compiles_for_sm90_at_the_residency_its_case_needs(compiled):
    assert set(compiled) == set(pk.CONFIGS)
    for name, config in pk.CONFIGS.items():
        for build in ("plain", "auto"):
            got = compiled[name][build]
            assert got["resident"] == config.resident, (name, build, got)
            assert got["spill_bytes"] == 0, (name, build, got)
        assert (
            compiled[name]["auto"]["instrumented"] and not compiled[name]["plain"]["instrumented"]
        )


def test_the_fma_kernels_keep_every_dependent_fma(compiled):
    # The loop of N FMAs a chain is unrolled or not, but never folded: a and b are arguments.
    for name, config in pk.CONFIGS.items():
        fmas = compiled[name]["plain"]["fma"]
        if config.kernel == "fma":
            assert fmas in (config.chains, config.chains * config.fmas), (name, fmas)
        else:
            assert fmas == 0, name


# -- the cases on the model of the GPU (--dry-run) ----------------------------------------------


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fix_first")
    status = ff.main(["--dry-run", "--json", str(out / "fix_first.json")])
    return status, json.loads((out / "fix_first.json").read_text()), out


def test_dry_run_ranks_every_plant_first_and_measures_its_fix(dry_run):
    status, doc, _ = dry_run
    assert status == 0 and doc["dry_run"] is True
    rows = {r["case"]: r for r in doc["rows"]}
    assert set(rows) == set(ff.CASES)
    for case, r in rows.items():
        assert r["ranked_first"], (case, r["first"])
        assert r["first"] == ff.EXPECTED[case]
        assert r["estimate_us"] > 0 and r["fixed_us"] < r["planted_us"], case
        assert r["recovered_of_estimate"] == pytest.approx(r["recovered_us"] / r["estimate_us"])
    assert rows["matmul"]["findings"][0]["evidence"]["source"] == "launch shape"
    assert rows["rank"]["findings"][0]["rank"] == 1


def test_a_control_holds_only_where_its_estimate_was_recovered():
    row = {"estimate_us": 19.8, "recovered_us": -9.4, "planted_us": 224.3, "control": True}
    assert not ff.control_holds(row)  # the H200's mem_wave of 2026-11-29: a false promise
    assert ff.control_holds(dict(row, estimate_us=4.0))  # within 2 % of the step
    assert ff.control_holds(dict(row, estimate_us=30.0, recovered_us=15.0))
    assert not ff.control_holds(dict(row, estimate_us=40.0, recovered_us=15.0))
    assert ff.badness(dict(row, ok=False)) == math.inf and ff.badness(dict(row, ok=True)) == 0


def test_dry_run_rows_are_worst_case_first(dry_run):
    rows = dry_run[1]["rows"]
    bad = [ff.badness(r) for r in rows]
    assert bad == sorted(bad, reverse=True)


def test_dry_run_diffs_the_plant_against_its_fix_with_the_estimate_beside_what_was_recovered(
    dry_run,
):
    _, doc, out = dry_run
    row = next(r for r in doc["rows"] if r["case"] == ff.DIFF_CASE)
    d = row["diff"]
    assert "error" not in d, d
    f = d["finding"]
    assert f["kind"] == "partial_wave" and f["kernel"] == row["first_kernel"]
    assert f["estimate_ns"] == pytest.approx(row["estimate_us"] * 1e3)
    assert f["recovered_ns"] > 0
    assert f["recovered_over_estimate"] == pytest.approx(f["recovered_ns"] / f["estimate_ns"])
    for name in ("plant.npz", "fix.npz", "diff.json"):
        assert (out / f"fix_first.{ff.DIFF_CASE}.{name}").exists()
    assert json.loads((out / f"fix_first.{ff.DIFF_CASE}.diff.json").read_text())["findings"]


def test_dry_run_prints_the_table_and_the_diff_line(dry_run, capsys):
    ff.main(["--dry-run", "--cases", "fma_wave16,skew", "--out-dir", str(dry_run[2] / "again")])
    out = capsys.readouterr().out
    assert "[1/2] fma_wave16:" in out and "[2/2] skew:" in out  # progress, as it goes
    assert "(the dry run's model, not measured)" in out
    assert "sm-profiler diff of the plant's and the fix's recordings: estimate" in out


def test_an_unknown_case_is_one_clear_line(capsys):
    with pytest.raises(SystemExit):
        ff.main(["--dry-run", "--cases", "fma_wave16,nope"])
    assert "no case named nope" in capsys.readouterr().err


# -- the plants and their fixes -------------------------------------------------------------------


def evidence_for(case: str, counts: list[int], resident: int) -> dict:
    """What the advisor's finding of the plant says (the figures the fixes read)."""
    return {"programs": len(counts), "slots": H200_SMS * resident, "sms": H200_SMS}


@pytest.mark.parametrize("case", UNIT_CASES)
def test_a_fix_does_the_plants_work_another_way(case):
    resident = pk.CONFIGS[ff.PLANTS[case].config].resident
    (counts,) = ff.planted_counts(case, H200_SMS, resident)
    (fixed,) = ff.fixed_counts(case, evidence_for(case, counts, resident), [counts])
    assert sum(fixed) == sum(counts) and min(fixed) > 0
    if ff.EXPECTED[case] == "partial_wave":
        assert len(counts) == math.ceil(ff.WAVES * H200_SMS * resident)  # 1.1 waves
        assert len(fixed) == H200_SMS * resident  # one whole wave
        assert max(fixed) - min(fixed) <= 1
    elif ff.EXPECTED[case] == "tail":
        assert len(fixed) == len(counts) and max(fixed) - min(fixed) <= 1
        assert max(counts) >= 8 * min(counts)
    else:  # idle SMs: each program split, one program an SM at least
        assert len(counts) < H200_SMS <= len(fixed)


def test_the_idle_plant_uses_a_quarter_of_the_sms_and_the_tail_one_program_in_64():
    (idle,) = ff.planted_counts("fma_idle", H200_SMS, 4)
    assert len(idle) == H200_SMS // 4
    (tail,) = ff.planted_counts("fma_tail", H200_SMS, 4)
    long = [p for p, c in enumerate(tail) if c > min(tail)]
    assert len(tail) == H200_SMS * 4 and len(long) == len(tail) // 64
    assert {tail[p] for p in long} == {8 * min(tail)}


def test_the_gaps_fix_replays_the_same_launches_and_the_rank_fix_splits_evenly():
    plant = ff.planted_counts("gaps", H200_SMS, 32)
    assert len(plant) == ff.GAP_LAUNCHES and ff.fixed_counts("gaps", {}, plant) == plant
    slow, fast = (ff.planted_counts("rank", H200_SMS, 1, r)[0] for r in (1, 0))
    (fixed,) = ff.fixed_counts("rank", {}, [slow])
    assert sum(fixed) * 2 == sum(slow) + sum(fast)


# -- the matmul plant: shapes from a sweep of CUPTI's launch shapes --------------------------


def gemm(name="gemm_a", grid=(32, 5, 1), block=(256, 1, 1), regs=168, smem=98_304, dur=20_000):
    return {
        "name": name,
        "grid": list(grid),
        "block": list(block),
        "registers": regs,
        "shared": smem,
        "dur_ns": dur,
    }


def sweep_of(tiles_m, **kw):
    """A sweep of one (dtype, N, K): M = 128 x tiles, 32 tiles of N, one kernel each."""
    return {("float32", 4096, 1024, 128 * t): [gemm(grid=(32, t, 1), **kw)] for t in tiles_m}


def test_the_matmul_plant_has_a_last_wave_under_40_percent_full_and_its_fix_fills_its_waves():
    # 168 registers x 256 threads: one block a SM; 132 slots. 5 tiles of M: 160 blocks, 1.21
    # waves; 4 tiles: 128 blocks, 0.97 waves; 3 tiles 0.73 (too empty to be the fix); 6 and 7
    # tiles: 1.45 and 1.70 waves (last waves too full to be the plant).
    plan, seen = ff.choose_matmul(sweep_of(range(1, 9)), H200_SMS)
    assert plan["m_planted"] == 640 and plan["planted_shape"]["blocks"] == 160
    assert plan["planted_shape"]["resident_per_sm"] == 1
    assert 0.05 <= ff.last_fill(plan["planted_shape"]["waves"]) <= 0.4
    fixed = plan["fixed_shape"]["waves"]
    assert fixed / math.ceil(fixed) >= ff.MATMUL_FIX_FILL
    assert plan["m_total"] == plan["m_planted"] * plan["chunks_planted"]
    assert plan["m_total"] == plan["m_fixed"] * plan["chunks_fixed"]
    assert len(seen) == 8 and "1.21 waves" in seen[4]


def test_the_matmul_plant_may_be_several_waves_as_the_h200s_fp32_kernel_was():
    # What the H200's sweep of 2026-11-29 saw of its one-block-a-SM fp32 kernel (grid
    # [M / 256, 32]): no M of 1.1-1.35 waves, but 14 tiles (448 blocks, 3.39 waves: 4 waves, the
    # last 39 % full) and 8 tiles (1.94 waves) of the same kernel; lcm 14,336 rows = 4 planted
    # chunks or 7 fixed ones.
    sweep = {("float32", 4096, 1024, 256 * t): [gemm(grid=(t, 32, 1))] for t in (8, 14, 15)}
    plan, _ = ff.choose_matmul(sweep, H200_SMS)
    assert (plan["m_planted"], plan["m_fixed"]) == (3584, 2048)
    assert plan["planted_shape"]["waves"] == pytest.approx(448 / 132)
    assert plan["m_total"] % 14336 == 0
    assert plan["chunks_planted"] * 7 == plan["chunks_fixed"] * 4


def test_the_matmul_fix_must_run_the_plants_kernel():
    sweep = sweep_of([5])
    sweep[("float32", 4096, 1024, 512)] = [gemm("gemm_b", grid=(32, 4, 1))]  # another kernel
    assert ff.choose_matmul(sweep, H200_SMS)[0] is None


def test_the_matmul_plant_prefers_one_block_a_sm():
    # 64 registers x 256 threads: 4 blocks a SM (528 slots): 20 tiles of M = 640 blocks, 1.21
    # waves, beside the one-block kernel of another N.
    sweep = {
        ("bfloat16", 2048, 2048, 128 * t): [gemm("many", (32, t, 1), regs=64, smem=0)]
        for t in (16, 20)
    }
    sweep.update({("float32", 4096, 1024, 128 * t): [gemm(grid=(32, t, 1))] for t in (4, 5)})
    plan, _ = ff.choose_matmul(sweep, H200_SMS, SmLimits())
    assert plan["kernel"] == "gemm_a" and plan["planted_shape"]["resident_per_sm"] == 1
    del sweep[("float32", 4096, 1024, 640)]
    plan, _ = ff.choose_matmul(sweep, H200_SMS, SmLimits())
    assert plan["kernel"] == "many" and plan["planted_shape"]["resident_per_sm"] == 4


def test_a_split_k_matmul_of_two_kernels_is_not_a_plant():
    sweep = sweep_of([4, 5])
    sweep[("float32", 4096, 1024, 640)].append(gemm("splitk_reduce", grid=(8, 1, 1)))
    plan, seen = ff.choose_matmul(sweep, H200_SMS)
    assert plan is None and "2 kernels (not one with a launch shape)" in seen[1]


def test_sweep_rows_give_each_range_the_kernels_its_launches_ran():
    def ev(cat, name, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": args}

    doc = {
        "traceEvents": [
            ev("user_annotation", "s0", 10.0, 5.0),
            ev("user_annotation", "s1", 20.0, 5.0),
            ev("cuda_runtime", "cudaLaunchKernel", 12.0, 1.0, correlation=7),
            ev("cuda_driver", "cuLaunchKernelEx", 21.0, 1.0, correlation=8),
            ev("cuda_runtime", "cudaLaunchKernel", 40.0, 1.0, correlation=9),  # in no range
            ev(
                "kernel",
                "g0",
                100.0,
                2.5,
                correlation=7,
                grid=[4, 2, 1],
                block=[128, 1, 1],
                **{"registers per thread": 96, "shared memory": 1024},
            ),
            ev("kernel", "g1", 110.0, 3.0, correlation=8, grid=[1, 1, 1], block=[64, 1, 1]),
            ev("kernel", "g2", 120.0, 1.0, correlation=9, grid=[1, 1, 1], block=[64, 1, 1]),
        ]
    }
    rows = ff.sweep_rows(doc, ["s0", "s1"])
    assert [r["name"] for r in rows["s0"]] == ["g0"] and rows["s0"][0]["dur_ns"] == 2500
    assert rows["s0"][0]["registers"] == 96 and rows["s0"][0]["grid"] == [4, 2, 1]
    assert [r["name"] for r in rows["s1"]] == ["g1"] and rows["s1"][0]["registers"] is None


# -- the table ------------------------------------------------------------------------------------


def test_the_table_says_what_was_ranked_first_instead_and_puts_it_first():
    rows = [
        {
            "case": "wave",
            "ranked_first": True,
            "recovered_of_estimate": 0.9,
            "estimate_us": 10.0,
            "planted_us": 50.0,
            "fixed_us": 41.0,
            "recovered_us": 9.0,
        },
        {"case": "skew", "ranked_first": False, "first": "host_gaps"},
        {"case": "rank", "skipped": "needs 2 GPUs (1 visible)", "ranked_first": None},
        {
            "case": "few",
            "ranked_first": True,
            "recovered_of_estimate": 0.5,
            "estimate_us": 10.0,
            "planted_us": 50.0,
            "fixed_us": 45.0,
            "recovered_us": 5.0,
        },
    ]
    ordered = ff.worst_first(rows)
    assert [r["case"] for r in ordered] == ["skew", "few", "wave", "rank"]
    text = ff.format_table(ordered)
    assert text[1].startswith("skew") and "NO: host_gaps" in text[1]
    assert text[2].split()[-1] == "50%" and text[3].split()[-1] == "90%"
    assert "skipped: needs 2 GPUs" in text[4]


def test_a_case_that_raises_is_a_row_with_its_error_and_the_next_case_runs(tmp_path, capsys):
    class Broken(ff.Model):
        def step(self, config, launches, graph=False, fresh=False):
            if config.name == "fma16":
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            return super().step(config, launches, graph, fresh)

    saved = []
    rows = ff.run_cases(["fma_wave16", "skew"], Broken(), str(tmp_path), saved.append)
    assert [r["case"] for r in rows] == ["fma_wave16", "skew"]  # the failure first: the worst
    assert rows[0]["error"].startswith("RuntimeError: CUDA error") and not rows[0]["ranked_first"]
    assert rows[1]["ranked_first"]
    assert [len(s) for s in saved] == [1, 2]  # the JSON is written after every case
    assert "ERROR: RuntimeError: CUDA error" in ff.format_table(rows)[1]
    assert "Traceback" in capsys.readouterr().out
