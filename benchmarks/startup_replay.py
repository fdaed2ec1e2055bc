"""Start-up time with a tune record against without, side by side (run by hand, not in CI).

`bringup tune` records a model's plan into a fresh profile (runs: --runs). Then three kinds of start alternate,
--rounds times each, in one process: `record` (the record replayed: no timing but the checks), `older record` (the
same record without the graphs', prefill chunk's and attention check's numbers, as records written before they were
kept: those measured, the rest replayed) and `no record` (everything measured). Printed: the machine, the load
average, each start's seconds, the fastest of each kind and the ratios, and the rows' evidence of one start of each.

Run:  python benchmarks/startup_replay.py [--model DIR|FILE] [--dtype float32] [--rounds 3] [--runs 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import header_lines, machine_facts  # noqa: E402
from bringup.backends.registry import device_info  # noqa: E402
from bringup.profiles.schema import Profile  # noqa: E402
from bringup.profiles.sections.models import ModelPlanRecord  # noqa: E402
from bringup.profiles.store import update_profile  # noqa: E402
from bringup.runner.engine.engine import EngineOptions, LLMEngine  # noqa: E402
from bringup.runner.engine.tuning import tune  # noqa: E402

OLDER = {"graph_decode": None, "prefill": None, "attention_check": None}
ROWS = ("attention", "graphs", "prefill_chunk")


def _profiles(options: EngineOptions, runs: int, folder: Path) -> tuple[Path, Path]:
    """A profile holding the tune record, and one holding it without the late decisions' numbers."""
    _, key, record = tune(options, runs)
    paths = []
    for name, rec in (("record", record), ("older", record.model_copy(update=OLDER))):
        def mutate(p: Profile, rec: ModelPlanRecord = rec) -> None:
            p.models = {key: rec}
        path = folder / f"{name}.yaml"
        update_profile(path, device_info(options.device), mutate, stage="tune", status="complete")
        paths.append(path)
    return paths[0], paths[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--max-model-len", type=int, default=1024)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="startup_replay_"))
    options = EngineOptions(model_dir=args.model, device="cpu", dtype=args.dtype, profile_path=folder / "tuned.yaml",
                            max_model_len=args.max_model_len)
    print("\n".join(header_lines(machine_facts("cpu"))))
    print(f"load average before: {os.getloadavg()}")
    began = time.perf_counter()
    with_record, older = _profiles(options, args.runs, folder)
    print(f"tune ({args.runs} runs): {time.perf_counter() - began:.1f} s")
    kinds = {"record": replace(options, profile_path=with_record),
             "older record": replace(options, profile_path=older),
             "no record": replace(options, profile_path=with_record, use_record=False)}
    seconds: dict[str, list[float]] = {k: [] for k in kinds}
    evidence: dict[str, dict[str, str]] = {}
    for _ in range(args.rounds):
        for kind, opts in kinds.items():
            start = time.perf_counter()
            engine = LLMEngine.create(opts)
            seconds[kind].append(time.perf_counter() - start)
            evidence[kind] = {row: getattr(engine.plan, row).evidence for row in ROWS}
            del engine
    print(f"load average after: {os.getloadavg()}")
    for kind, times in seconds.items():
        print(f"{kind:>13}: " + ", ".join(f"{t:.2f}" for t in times) + f" s; fastest {min(times):.2f} s")
    base = min(seconds["no record"])
    for kind in ("record", "older record"):
        print(f"no record / {kind}: {base / min(seconds[kind]):.2f}x")
    for kind, rows in evidence.items():
        print(f"\n[{kind}]")
        for row, text in rows.items():
            print(f"  {row}: {text}")


if __name__ == "__main__":
    main()
