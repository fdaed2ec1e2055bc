"""Speed of `bringup verify-ops`: the eager catalog (float32 + bfloat16 + float16) with and without isolation.

Prints cases per second for each mode and the isolation overhead against --no-isolate (goal <= 25 %;
goal for the isolated run on a 2-core CPU: <= 120 s). Not a test: run it by hand.

    PYTHONPATH=. python benchmarks/verify_ops_speed.py            # the full eager catalog
    PYTHONPATH=. python benchmarks/verify_ops_speed.py --op softmax --op matmul
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DTYPES = ("float32", "bfloat16", "float16")
REPO = Path(__file__).resolve().parents[1]


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_mode(isolate: bool, extra: list[str], workdir: Path) -> tuple[float, float, int, dict]:
    profile = workdir / f"{'isolated' if isolate else 'inprocess'}.yaml"
    cmd = [sys.executable, "-m", "bringup", "verify-ops", "--json", "--device", "cpu", "--profile", str(profile),
           "--isolate" if isolate else "--no-isolate", *[a for d in DTYPES for a in ("--dtype", d)], *extra]
    start, cpu_start = time.perf_counter(), _children_cpu_s()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, env=env)
    seconds, cpu_s = time.perf_counter() - start, _children_cpu_s() - cpu_start
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        sys.exit(f"verify-ops failed ({proc.returncode}): {proc.stderr[-3000:]}")
    doc = json.loads(proc.stdout)
    return seconds, cpu_s, len(doc["cases"]), doc["summary"]["ops"]


def interleaved_overhead(chunk: int = 40) -> tuple[float, float, int]:
    """Executor-level A/B: the same cases in chunks, alternating in-process and one long-lived worker.

    Alternating cancels drifting load from other work on the machine; worker start-up is included
    once (as in a real run). Returns (in-process s, isolated s, cases).
    """
    sys.path.insert(0, str(REPO))
    from bringup.probes.ops.catalog import load_catalog, select_cases
    from bringup.probes.ops.runner import op_task
    from bringup.probes.ops.stage import worker_env
    from bringup.probes.ops.worker import InProcessExecutor, IsolatedExecutor

    tasks = [op_task(k) for k in select_cases(load_catalog(), None, list(DTYPES), None)]
    inproc, isolated = InProcessExecutor("cpu"), IsolatedExecutor("cpu", 300.0, worker_env(None))
    spent = {False: 0.0, True: 0.0}
    for i in range(0, len(tasks), chunk):
        for mode, executor in ((True, isolated), (False, inproc)) if (i // chunk) % 2 else \
                ((False, inproc), (True, isolated)):
            start = time.perf_counter()
            for task in tasks[i:i + chunk]:
                executor.run(task)
            spent[mode] += time.perf_counter() - start
    isolated.close()
    return spent[False], spent[True], len(tasks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", action="append", default=[], help="restrict to these ops (repeatable)")
    parser.add_argument("--repeat", type=int, default=2,
                        help="runs per mode, interleaved (the fastest of each counts: other load only slows)")
    args = parser.parse_args()
    extra = [a for op in args.op for a in ("--op", op)]
    with tempfile.TemporaryDirectory(prefix="verify-ops-bench-") as tmp:
        runs: dict[bool, list[tuple[float, float, int, dict]]] = {False: [], True: []}
        for _ in range(args.repeat):
            for isolate in (False, True):
                runs[isolate].append(run_mode(isolate, extra, Path(tmp)))
        results = {mode: min(r, key=lambda x: x[0]) for mode, r in runs.items()}
        for mode, r in runs.items():
            print(f"{'isolated' if mode else '--no-isolate'} runs (s wall): {', '.join(f'{x[0]:.1f}' for x in r)}")
    (t_in, cpu_in, n_in, _), (t_iso, cpu_iso, n_iso, counts_iso) = results[False], results[True]
    print(f"cases: {n_iso} ({', '.join(DTYPES)}); statuses isolated: {counts_iso}")
    print(f"--no-isolate: {t_in:7.1f} s wall  {n_in / t_in:6.1f} cases/s  {cpu_in:7.1f} s CPU (all processes)")
    print(f"isolated:     {t_iso:7.1f} s wall  {n_iso / t_iso:6.1f} cases/s  {cpu_iso:7.1f} s CPU  (goal <= 120 s)")
    print(f"isolation overhead: {100 * (t_iso - t_in) / t_in:+.1f} % wall, {100 * (cpu_iso - cpu_in) / cpu_in:+.1f} % "
          "CPU (goal <= 25 %)")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
          "(wall times inflate when other work shares the CPUs)")
    t_a, t_b, n = interleaved_overhead()
    print(f"interleaved A/B over {n} cases (chunks alternate; start-up included): in-process {t_a:.1f} s, "
          f"isolated {t_b:.1f} s, overhead {100 * (t_b - t_a) / t_a:+.1f} % (goal <= 25 %)")


if __name__ == "__main__":
    main()
