"""Auto mode: the SM timeline of a torch.compile'd model, no kernel source touched.

You will learn:
  * how to profile every Triton kernel Inductor generates for a model (`sm_profiler.auto()`),
  * how to read the kernel report: which kernels take the time, how many waves their grids make,
    how much SM-time sits idle in their tails,
  * how to find the launch with the worst tail and look at it in Perfetto.

Run: python examples/auto_torch_compile.py [OUT_DIR]   (needs a CUDA GPU; on a CPU it says so)
The same without editing the script: sm-profiler run -- your_training_script.py (docs/auto.md).
"""

# %%
import os
import sys

import torch

OUT = sys.argv[1] if len(sys.argv) > 1 else "sm_profiler_examples_out"


class Block(torch.nn.Module):
    """A pre-LN transformer block: attention and an MLP, the kernels a language model spends on."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        a = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


def main():
    if not torch.cuda.is_available():
        print(
            "examples/auto_torch_compile.py: skipped, needs a CUDA GPU (auto mode instruments "
            "compiled kernels; the CPU interpreter compiles none)"
        )
        return
    import sm_profiler

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block(512, 8) for _ in range(2)]).cuda().to(torch.bfloat16)
    x = torch.randn(8, 512, 512, device="cuda", dtype=torch.bfloat16)
    compiled = torch.compile(model)

    # %% Everything compiled inside the region is instrumented: make the first call here.
    with sm_profiler.auto() as prof:
        for _ in range(3):  # the first step compiles; the next two are the steady state
            compiled(x).float().pow(2).mean().backward()

    # %% The report: kernels by time; waves < 1 means SMs with nothing to do for the whole
    # launch, a fractional last wave (1.2 waves) leaves most SMs idle while a few finish; idle%
    # is that SM-time, and the tail says how long the last SM ran past the median one.
    prof.print_stats(width=100)
    reports = sm_profiler.report.auto_report.launch_reports(prof.decode())
    # The launch that leaves the most SM-time idle (idle share x span): where a better grid or a
    # fusion would pay most. Small grids (waves < 1) idle most SMs for the whole launch.
    worst = max(reports, key=lambda r: r.idle_pct * r.span_ns)
    print(
        f"\nmost idle SM-time: {worst.kernel} (launch {worst.capture}): {worst.programs} "
        f"programs, {worst.waves:.1f} waves, {worst.idle_pct:.0f}% of SM-time idle over its "
        f"{worst.span_ns / 1e3:.1f} us; its last SM (SM {worst.last_sm}) ends "
        f"{worst.tail_ns / 1e3:.2f} us after the median SM"
    )

    # %% The trace: each SM a track, its programs on 'slot' rows, named after their kernel.
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "auto_torch_compile.perfetto-trace")
    prof.export(path)
    prof.save(os.path.join(OUT, "auto_torch_compile.npz"))
    print(f"wrote {path} (sm-profiler open {path})")


if __name__ == "__main__":
    main()
