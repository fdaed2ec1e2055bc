"""Our harness vs torch.utils.benchmark.Timer.adaptive_autorange on the same matmul, side by side.

Run:  PYTHONPATH=. python benchmarks/harness_vs_timer.py [--size 512] [--rounds 3] [--device cpu] [--threads 1]
Prints each round's medians and their ratio; exits 1 when the median ratio over the rounds is off by
more than 5 %. Each round runs both back to back with the same calls per timed block (Timer's choice),
so drift on a shared machine hits both alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch
from torch.utils.benchmark import Timer

from bringup.probes.bench.harness import Harness, HarnessSettings

TOLERANCE = 0.05


def timer_measurement(a: torch.Tensor, b: torch.Tensor, threshold: float):
    timer = Timer(stmt="torch.matmul(a, b)", globals={"torch": torch, "a": a, "b": b},
                  num_threads=torch.get_num_threads())
    return timer.adaptive_autorange(threshold=threshold, min_run_time=0.01, max_run_time=10.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for both (1 keeps OpenMP barriers out of a shared machine's noise)")
    parser.add_argument("--threshold", type=float, default=0.1, help="IQR/median stop for both (Timer's default)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    a = torch.randn(args.size, args.size, device=device)
    b = torch.randn(args.size, args.size, device=device)
    # Timer sizes blocks to make its timer overhead negligible (one call per block for a ms-long
    # matmul) and stops once IQR/median < threshold with more than 3 blocks, within 10 s.
    settings = HarnessSettings(warmup=3, min_reps=4, max_reps=100_000, rel_iqr_threshold=args.threshold,
                               budget_s=10.0, min_rep_s=1e-3)
    harness = Harness.for_device(device, settings)
    ratios = []
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"matmul {args.size}x{args.size} float32 on {device}, threads={torch.get_num_threads()}, "
          f"load average {load:.2f} on {os.cpu_count()} CPUs")
    for round_index in range(args.rounds):
        # Timer first: its block size (calls per timed block, chosen so its timer overhead is <= 1e-4
        # of a block) is then used by the harness too, so both time the same blocks; on a loaded
        # machine a 50 ms block and a 1 ms block see preemption differently, which is not what this
        # comparison is about. The harness's own calibration is printed alongside.
        theirs = timer_measurement(a, b, args.threshold)
        ours = harness.measure(lambda: torch.matmul(a, b), calls_per_rep=theirs.number_per_run)
        ratio = ours.median_s / theirs.median
        ratios.append(ratio)
        print(f"round {round_index + 1}: harness median {ours.median_s * 1e3:.4f} ms "
              f"(IQR/med {ours.stats.rel_iqr:.3f}, {ours.reps} reps x {ours.calls_per_rep} calls, {ours.stop}); "
              f"Timer.adaptive_autorange median {theirs.median * 1e3:.4f} ms "
              f"({len(theirs.times)} blocks x {theirs.number_per_run} calls); ratio {ratio:.4f}")
    calibrated = harness.measure(lambda: torch.matmul(a, b))
    print(f"(harness with its own calibration: median {calibrated.median_s * 1e3:.4f} ms, "
          f"{calibrated.reps} reps x {calibrated.calls_per_rep} calls, {calibrated.stop})")
    overall = statistics.median(ratios)
    verdict = "agree" if abs(overall - 1.0) <= TOLERANCE else "DISAGREE"
    print(f"median ratio harness/Timer = {overall:.4f} -> {verdict} (tolerance ±{TOLERANCE:.0%})")
    return 0 if verdict == "agree" else 1


if __name__ == "__main__":
    sys.exit(main())
