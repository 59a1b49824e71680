"""Mistakes a new user makes, each answered by one line that names the fix: a CUDA profiler
without CUDA, TRITON_INTERPRET switched after the ops (or triton) were imported, a CPU profiler
without the interpreter, a tensor other than the profiler's buffer passed to the kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from repo_paths import ROOT, SUPPORT  # noqa: E402

from sm_profiler.errors import ConfigError  # noqa: E402
from sm_profiler.profiler import SmProfiler  # noqa: E402

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _run(script: str, interpret: str | None, timeout: int = 300) -> subprocess.CompletedProcess:
    """`script` in a fresh interpreter with the worktree first on sys.path and TRITON_INTERPRET
    set to `interpret` (None: unset) when the process starts."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret is not None:
        env["TRITON_INTERPRET"] = interpret
    env["PYTHONPATH"] = os.pathsep.join([ROOT, SUPPORT, env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
    )


# -- no CUDA -------------------------------------------------------------------------------------


# -- Triton 3.6's interpreter with numpy 2.4 ------------------------------------------------------


@pytest.mark.parametrize(
    ("triton_version", "numpy_version", "refused"),
    [
        ("3.6.0", "2.4.6", True),
        ("3.6.0", "2.3.5", False),
        ("3.7.1", "2.4.6", False),
        ("3.9.0", "2.4.0rc1", False),
        ("3.6.0", "2.4.0rc1", True),
        ("3.10.0", "3.0.0", False),
    ],
)
def test_the_interpreter_numpy_rule(triton_version, numpy_version, refused):
    from sm_profiler.profiler import _interpreter_numpy_error

    msg = _interpreter_numpy_error(triton_version, numpy_version)
    assert bool(msg) == refused
    if refused:
        assert "numpy<2.4" in msg and "Triton 3.7" in msg and numpy_version in msg


def test_a_cpu_profiler_under_triton_36_with_numpy_24_names_the_fix(monkeypatch):
    import numpy as np
    import triton

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(triton, "__version__", "3.6.0")
    monkeypatch.setattr(np, "__version__", "2.4.6")
    with pytest.raises(ConfigError, match=r"numpy<2\.4"):
        SmProfiler(4, 1, 8, device="cpu")


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_a_cuda_profiler_without_cuda_says_to_use_the_interpreter(monkeypatch, device):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError) as e:
        SmProfiler(4, device=device)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"SmProfiler(device={device!r}): torch sees no CUDA device")
    assert "device='cpu'" in msg and "TRITON_INTERPRET=1 before importing triton" in msg


def test_the_default_device_is_cuda_and_is_checked(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="torch sees no CUDA device"):
        SmProfiler(4)
    SmProfiler(4, device="cpu")  # the check is about CUDA only


def test_cuda_with_cuda_is_not_refused(monkeypatch):
    """With CUDA available the check passes and the buffer is allocated on the device (here a
    stand-in: allocation on 'cuda' is what fails without one, so count the calls instead)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    seen = []
    monkeypatch.setattr(SmProfiler, "init_buffer", lambda self: seen.append(self.device))
    SmProfiler(4, device="cuda")
    assert seen == ["cuda"]


# -- TRITON_INTERPRET switched after sm_profiler.triton_ops was imported -------------------------

LATE_SWITCH = """
    import os, json
    import triton
    import sm_profiler.triton_ops  # the ops choose GPU or interpreter code here
    from sm_profiler import ConfigError, SmProfiler

    out = {}
    early = SmProfiler(2, device="cpu")  # created before the switch: get_buffer must catch it
    os.environ["TRITON_INTERPRET"] = FLIP
    for name, make in (("init", lambda: SmProfiler(2, device="cpu")),
                       ("get_buffer", early.get_buffer)):
        try:
            make()
            out[name] = None
        except ConfigError as e:
            out[name] = str(e)
    print(json.dumps(out))
"""


@pytest.mark.parametrize("start, flip", [(None, "1"), ("1", "0")])
def test_switching_the_interpreter_after_importing_the_ops_is_caught(start, flip):
    r = _run(LATE_SWITCH.replace("FLIP", repr(flip)), interpret=start)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.splitlines()[-1])
    for where in ("init", "get_buffer"):
        msg = out[where]
        assert msg is not None, where
        assert "\n" not in msg
        assert msg.startswith(f"TRITON_INTERPRET was {'set' if flip == '1' else 'unset'}")
        assert "set TRITON_INTERPRET before importing triton and sm_profiler.triton_ops" in msg


def test_the_switch_set_before_importing_is_fine_and_the_kernel_runs():
    """The control: the same steps with TRITON_INTERPRET set first raise nothing, and the
    launch that the check protects works."""
    r = _run(
        """
        import os
        os.environ["TRITON_INTERPRET"] = "1"
        import torch
        import triton_kernels as K
        from sm_profiler import SmProfiler
        from sm_profiler.trace.decode import decode

        prof = SmProfiler(2, device="cpu")
        x = torch.ones(64)
        out = torch.empty(64)
        K.add_kernel[(2,)](x, x, out, 64, prof.get_buffer(), BLOCK=32, PROFILE=True)
        assert out.eq(2).all()
        print(len(decode(prof.captures())))
        """,
        interpret=None,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["4"]  # load and store ranges of 2 programs


AFTER_TRITON = """
    import os
    import triton
    import triton.language as tl
    os.environ["TRITON_INTERPRET"] = "1"  # too late: triton chose its GPU code when imported
    from sm_profiler import ConfigError, SmProfiler
    from sm_profiler.triton_ops import profiler_init

    try:
        SmProfiler(2, device="cpu")
        print("no error")
    except ConfigError as e:
        print(e)
"""


def test_the_interpreter_switched_on_after_importing_triton_is_caught():
    """Issue 32, item 2: set after `import triton` but before sm_profiler (the ops agree with
    the switch, Triton's own tl.zeros does not): one line naming the fix, not an
    InterpreterError from deep inside the kernel."""
    r = _run(AFTER_TRITON, interpret=None)
    assert r.returncode == 0, r.stderr[-3000:]
    msg = r.stdout.strip()
    assert "\n" not in msg
    assert msg.startswith("TRITON_INTERPRET was set (now '1') after triton was imported")
    assert "set TRITON_INTERPRET=1 before importing triton" in msg


@pytest.mark.skipif(torch.cuda.is_available(), reason="without CUDA only")
def test_a_cpu_profiler_without_the_interpreter_names_the_switch():
    """Issue 32, item 2: device='cpu' with the interpreter off; the launch would fail in Triton
    with "0 active drivers". get_buffer (the hand-out for a launch) says what to do."""
    r = _run(
        """
        from sm_profiler import ConfigError, SmProfiler

        prof = SmProfiler(2, device="cpu")  # host-side use (save, decode) stays possible
        try:
            prof.get_buffer()
            print("no error")
        except ConfigError as e:
            print(e)
        """,
        interpret=None,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    msg = r.stdout.strip()
    assert msg.startswith(
        "SmProfiler(device='cpu') hands out a buffer for Triton's CPU interpreter"
    )
    assert "set TRITON_INTERPRET=1 before importing triton" in msg and "\n" not in msg


def test_without_the_check_triton_fails_with_a_message_that_does_not_say_why():
    """Why the check exists: the same late switch, launching without SmProfiler."""
    r = _run(
        """
        import os
        import torch
        import sm_profiler.triton_ops
        os.environ["TRITON_INTERPRET"] = "1"
        import triton, triton.language as tl
        from sm_profiler.triton_ops import profiler_init

        @triton.jit
        def k(prof):
            profiler_init(prof, 0, 0)

        k[(1,)](torch.zeros(64, dtype=torch.int64))
        """,
        interpret=None,
    )
    assert r.returncode != 0
    assert "Cannot call @triton.jit'd outside of the scope of a kernel" in r.stderr


# -- a tensor other than the profiler's buffer ---------------------------------------------------


@pytest.mark.skipif(not INTERPRETED, reason="needs TRITON_INTERPRET=1 (set by conftest.py)")
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_another_tensor_as_the_buffer_fails_under_the_interpreter(dtype):
    import triton_kernels as K

    x = torch.ones(64)
    out = torch.empty(64)
    wrong = torch.zeros(1024, dtype=getattr(torch, dtype))
    with pytest.raises(Exception, match=r"the int64 tensor from SmProfiler\.get_buffer\(\)"):
        K.add_kernel[(2,)](x, x, out, 64, wrong, BLOCK=32, PROFILE=True)


COMPILE = """
    import json
    import triton
    from triton.backends.compiler import GPUTarget
    import triton_kernels as K

    sig = {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32", "prof": None,
           "BLOCK": "constexpr", "PROFILE": "constexpr"}
    res = {}
    for prof in ("*fp32", "*i64"):
        sig["prof"] = prof
        src = triton.compiler.ASTSource(fn=K.add_kernel, signature=sig,
                                        constexprs={"BLOCK": 1024, "PROFILE": True})
        try:
            triton.compile(src, target=GPUTarget("cuda", 90, 32))
            res[prof] = "ok"
        except Exception as e:
            # Triton reports the call site; the static_assert's message is in the cause chain
            # (printed above it in a traceback).
            chain = []
            while e is not None:
                chain.append(f"{type(e).__name__}: {e}")
                e = e.__cause__
            res[prof] = chain
    print(json.dumps(res))
"""


def test_a_float_buffer_fails_to_compile_with_a_message_naming_get_buffer():
    r = _run(COMPILE, interpret=None)  # the GPU ops: no TRITON_INTERPRET in that process
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.splitlines()[-1])
    assert res["*i64"] == "ok"
    assert res["*fp32"][0].startswith("CompilationError")
    inner = res["*fp32"][-1]
    assert "the buffer must be the int64 tensor from SmProfiler.get_buffer()" in inner


# -- what `import sm_profiler` gives -------------------------------------------------------------


def test_host_submodules_are_attributes_of_the_package_and_triton_ops_is_not():
    r = _run(
        """
        import sys
        import sm_profiler
        assert "sm_profiler.report.stats" not in sys.modules and "torch" not in sys.modules
        print(sm_profiler.report.stats.compute_stats.__module__, sm_profiler.export.plot.plot.__module__,
              sm_profiler.export.export.__module__)
        try:
            sm_profiler.triton_ops
        except AttributeError as e:
            print(e)
        assert "triton" not in sys.modules and "sm_profiler.triton_ops" not in sys.modules
        """,
        interpret=None,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    first, second = r.stdout.splitlines()
    assert first == "sm_profiler.report.stats sm_profiler.export.plot sm_profiler.export"
    assert second.startswith("sm_profiler.triton_ops is not loaded by 'import sm_profiler'")
    assert "after setting TRITON_INTERPRET" in second
