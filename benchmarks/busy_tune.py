"""A plan recorded on a busy machine against no profile at a quiet moment: SmolLM2's batch-1 decode, one run, side by
side (run by hand, not in CI; issue 36's target: the busy record decodes at >= 0.95x the quiet start).

1. A busy loop holds one core the whole time (a process pinned to the last usable core spinning in Python).
2. Beside it, `bringup all` writes a profile and `bringup tune` records SmolLM2's plan into it (`--dtype`, default
   bfloat16). The busy loop stops.
3. On the quiet machine, three engines decode the same prompt with their decode steps interleaved
   (benchmarks/interleaved_decode.py): `busy record` (that profile: the record replayed), `no profile` (start-up
   times its own plan now, quietly) and a second `no profile` engine as the control, whose ratio to the first is the
   noise of the comparison itself.
Printed: the machine, the share of the CPU tune's timed threads got, both plans, each round's ratios and the median.

Run:  python benchmarks/busy_tune.py [--dtype bfloat16] [--rounds 5] [--profile P]   (--profile: a profile already
      made beside a busy loop; steps 1-2 are skipped)
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.interleaved_decode import paired_ratios  # noqa: E402
from benchmarks.machine import header_lines, machine_facts, plan_facts, plan_line  # noqa: E402
from bringup.profiles.store import load_profile  # noqa: E402
from bringup.runner.engine.engine import EngineOptions, LLMEngine  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
BUSY_LOOP = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


def busy_profile(model: Path, dtype: str, max_len: int) -> Path:
    profile = Path(tempfile.mkdtemp(prefix="busy-tune-")) / "profile.yaml"
    core = max(os.sched_getaffinity(0))
    loop = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(core)])
    try:
        for args in (["all", "--profile", str(profile)],
                     ["tune", "--model", str(model), "--dtype", dtype, "--profile", str(profile),
                      "--max-model-len", str(max_len)]):
            print(f"beside a busy loop on core {core}: bringup {' '.join(args[:1])} ...", flush=True)
            done = subprocess.run([sys.executable, "-m", "bringup", *args], capture_output=True, text=True, env=ENV,
                                  timeout=3600)
            if done.returncode not in (0, 1):  # all exits 1 on a verdict with warnings; the profile is written
                raise SystemExit(f"bringup {args[0]} failed ({done.returncode}): {(done.stderr or done.stdout)[-600:]}")
    finally:
        loop.kill()
        loop.wait()
    return profile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a Hugging Face directory (default: SmolLM2-135M-Instruct)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--profile", type=Path, help="a profile made beside a busy loop already (skips steps 1-2)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128, help="decode steps per round")
    parser.add_argument("--max-model-len", type=int, default=1024)
    args = parser.parse_args()
    if args.model is None:
        from tests.real_model import smollm2_hf_dir
        args.model = smollm2_hf_dir()
    print("\n".join(header_lines(machine_facts("cpu"))), flush=True)
    profile = args.profile or busy_profile(args.model, args.dtype, args.max_model_len)
    for key, record in (load_profile(profile).models or {}).items():
        share = "not measured" if record.cpu_share is None else f"{record.cpu_share:.0%}"
        print(f"record:  {key}, tuned {record.tuned}; tune's timed threads had {share} of the CPU")
    none = Path(tempfile.mkdtemp(prefix="busy-tune-none-")) / "absent.yaml"
    engines = {label: LLMEngine.create(EngineOptions(model_dir=args.model, device="cpu", dtype=args.dtype,
                                                     max_model_len=args.max_model_len, profile_path=path))
               for label, path in (("no profile", none), ("busy record", profile), ("control", none))}
    for label, engine in engines.items():
        print(f"{label + ':':13}{plan_line(plan_facts(engine.plan.to_dict()))[8:]}")
    prompt = engines["no profile"].tokenizer.encode("Tell me a long story about a cat who learns to sail.")
    paired = paired_ratios(engines, prompt, args.tokens, args.rounds, baseline="no profile")
    del engines
    gc.collect()
    print(f"\n{'engine':13} {'best tok/s':>10} {'ratio':>7}  rounds (ratio to `no profile`, steps interleaved)")
    for label, row in paired.items():
        print(f"{label:13} {row['decode_tok_s']:10.1f} {row['ratio']:7.3f}  {[round(r, 3) for r in row['ratios']]}")
    noise = max(abs(1 - r) for r in paired["control"]["ratios"])
    print(f"\nbusy record / quiet start: {paired['busy record']['ratio']:.3f}x (target >= 0.95; the control's "
          f"largest deviation, the comparison's own noise: {noise:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
