"""The quantized matmul kernels against the float F.linear of the same shape and the measured memory ceiling, at
SmolLM2-135M's layer shapes: what the runner's quantized paths would get from torch's own kernels here.

Run:  PYTHONPATH=. python benchmarks/quantized_kernels.py [--device cpu] [--threads N] [--activations float32]
Prints the machine, the triad bandwidth ceiling, then per shape and M (1: decode GEMV, 128: prefill GEMM) each
kernel's median time, GB/s of the bytes it must move (bench's accounting), the share of the triad ceiling and
its speed-up over F.linear with float weights. A kernel this torch or device lacks is listed with the reason.
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F

from benchmarks.machine import header_lines, machine_facts
from bringup.probes.bench.accounting import matmul_work, stream_work
from bringup.probes.bench.groups.quantized_matmul import Shape, kernels
from bringup.probes.bench.harness import Harness, HarnessSettings
from bringup.probes.bench.records import short_error

SMOLLM2 = {"gate/up 576x1536": (576, 1536), "down 1536x576": (1536, 576), "lm_head 576x49152": (576, 49152)}
TOKENS = (1, 128)
TRIAD_ELEMENTS = 1 << 25  # 3 float32 arrays of 128 MiB: far beyond any last-level cache
MAX_CALL_S = 3.0  # a kernel whose GEMV time x M says a call takes longer is not run at that M (it says so)


def triad_gbps(harness: Harness, device: torch.device) -> float:
    a = torch.zeros(TRIAD_ELEMENTS, device=device)
    b = torch.full((TRIAD_ELEMENTS,), 0.5, device=device)
    c = torch.full((TRIAD_ELEMENTS,), 0.25, device=device)
    timing = harness.measure(lambda: torch.add(b, c, alpha=0.4, out=a))
    return stream_work("triad", TRIAD_ELEMENTS, 4).bytes / timing.median_s / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--activations", default="float32")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device, act = torch.device(args.device), getattr(torch, args.activations)
    print("\n".join(header_lines(machine_facts(args.device))))
    harness = Harness.for_device(device, HarnessSettings(warmup=2, min_reps=5, max_reps=200, rel_iqr_threshold=0.05,
                                                         budget_s=1.5, min_rep_s=2e-3))
    ceiling = triad_gbps(harness, device)
    print(f"threads {torch.get_num_threads()}, activations {args.activations}; triad ceiling {ceiling:.1f} GB/s")
    print(f"{'shape':18} {'M':>4} {'kernel':28} {'median us':>10} {'GB/s':>7} {'% ceil':>7} {'vs F.linear':>11}")
    gemv_s: dict[tuple[str, str], float] = {}
    for label, (k, n) in SMOLLM2.items():
        for m in TOKENS:
            x = torch.randn(m, k, device=device).to(act)
            weight = torch.randn(n, k, device=device).to(act)
            base = harness.measure(lambda x=x, weight=weight: F.linear(x, weight))
            work = matmul_work(m, n, k, act.itemsize)
            print(f"{label:18} {m:>4} {'F.linear ' + args.activations:28} {base.median_s * 1e6:>10.1f} "
                  f"{work.bytes / base.median_s / 1e9:>7.1f} {100 * work.bytes / base.median_s / 1e9 / ceiling:>6.1f}%"
                  f" {'1.00x':>11}")
            for kernel in kernels():
                shape = Shape(m, k, n)
                estimate = gemv_s.get((label, kernel.name), 0.0) * m
                if estimate > MAX_CALL_S:
                    print(f"{label:18} {m:>4} {kernel.name:28} not run: ~{estimate:.0f} s per call from its GEMV")
                    continue
                try:
                    timing = harness.measure(kernel.setup(shape, act, device))
                except Exception as exc:
                    print(f"{label:18} {m:>4} {kernel.name:28} not run: {short_error(exc, 90)}")
                    continue
                if m == 1:
                    gemv_s[(label, kernel.name)] = timing.median_s
                nbytes = kernel.work(shape, act).bytes
                gbps = nbytes / timing.median_s / 1e9
                print(f"{label:18} {m:>4} {kernel.name:28} {timing.median_s * 1e6:>10.1f} {gbps:>7.1f} "
                      f"{100 * gbps / ceiling:>6.1f}% {base.median_s / timing.median_s:>10.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
