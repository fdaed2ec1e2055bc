"""Behaviour before and after a refactor: run it on the old tree, then on the new one, and compare.

    python scripts/refactor_parity.py --out before.json      # on the old commit
    python scripts/refactor_parity.py --out after.json       # on the new one
    python scripts/refactor_parity.py --compare before.json after.json
    python scripts/refactor_parity.py --device emu:1 --out before-emu.json   # the emulated accelerator

With --device emu:N the emulated accelerator is switched on (BRINGUP_EMU_SPEC=default, unless the variable is already
set) before torch is imported, and every engine starts on that device. A case whose start-up is refused with a clear
line (int8 and int4 off the host, today) records that line as its outcome: it must stay the same too.

It records, for SmolLM2-135M (the tests' cached copy: the float32 directory and the Q4_1 GGUF) with
--quantization none, int8 and int4, and the GGUF file as it is and with int4 (its Q4_1 blocks re-packed): the
plan's rows and the greedy tokens of two prompts, each under two stated sets of start-up measurements (the plain
paths win; the host kernels win: panels, paged decode, fused decode layers), so the plan does not depend on this
machine's timings. And a hash of every report the three reference profiles render (html and md, and each against
another as baseline) and of `profile show`. The compare prints each difference and exits 1 if there is one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROFILES = sorted((REPO / "reference" / "profiles").glob("*.yaml"))
PROMPTS = ("The capital of France is", "def fibonacci(n):\n    ")
TOKENS = 32
GIB = 2**30


def measurements(kernels: bool):
    from bringup.runner.plan.confirm import DecodeTimings
    from bringup.runner.plan.host_kernels import FUSED_LAYERS
    from bringup.runner.plan.layout import LayoutTimings
    from bringup.runner.plan.measurements import StartupMeasurements

    rows = (1, 2, 4, 8, 16, 32, 64, 256)
    if not kernels:
        times = {"in_out": 2.0, "out_in": 1.0}
        return StartupMeasurements(layouts=LayoutTimings({m: {k: us * m * 1e-6 for k, us in times.items()}
                                                          for m in rows}),
                                   paged_decode=(False, "not measured: given as data"), free_bytes=16 * GIB)
    times = {"in_out": 2.0, "out_in": 2.0, "panels": 1.0}
    decode = DecodeTimings(candidates={FUSED_LAYERS: (0.001, 0.002)}, how="stated", cpu_share=0.97)
    plain = StartupMeasurements(layouts=LayoutTimings({m: {k: us * m * 1e-6 for k, us in times.items()}
                                                       for m in rows}),
                                paged_decode=(True, "stated: paged decode wins"), free_bytes=16 * GIB,
                                decode=decode)
    return replace(plain, fused_decode=True)


def model_case(model: Path, quantization: str, kernels: bool, device: str) -> dict:
    import torch

    from bringup.errors import BringupError
    from bringup.runner.engine.engine import EngineOptions, LLMEngine
    from bringup.runner.sampling_params import SamplingParams

    torch.manual_seed(0)
    try:
        engine = LLMEngine.create(EngineOptions(model_dir=model, quantization=quantization, max_num_seqs=2,
                                                max_model_len=512, use_record=False, device=device,
                                                measurements=measurements(kernels)))
    except BringupError as exc:  # refused with a clear line: the line is the outcome
        return {"refused": f"{type(exc).__name__}: {exc}"}
    tokens = []
    for number, prompt in enumerate(PROMPTS):
        ids = engine.tokenizer.encode(prompt)
        engine.add_request(f"r{number}", ids, SamplingParams(max_tokens=TOKENS, temperature=0.0, ignore_eos=True))
    outputs = {}
    while engine.has_unfinished():
        for out in engine.step():
            if out.finished:
                outputs[out.request_id] = out.token_ids
    tokens = [outputs[f"r{n}"] for n in range(len(PROMPTS))]
    return {"rows": [list(map(str, row)) for row in engine.plan.rows()], "tokens": tokens}


def reports() -> dict:
    """The digests of the reports; each profile is read as a copy under the run's folder, by a relative path (the
    html names the file it was read from: the tree's path would make two trees' reports differ)."""
    digests = {}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "profiles").mkdir()
        for profile in PROFILES:
            shutil.copyfile(profile, Path(tmp) / "profiles" / profile.name)
        names = [f"profiles/{profile.name}" for profile in PROFILES]
        runs = []
        for profile, name in zip(PROFILES, names):
            runs += [(f"{profile.stem}.html", ["report", "-p", name, "-o", "-", "-f", "html"]),
                     (f"{profile.stem}.md", ["report", "-p", name, "-o", "-", "-f", "md"]),
                     (f"{profile.stem}.show", ["profile", "show", name])]
        for before, after, before_name, after_name in zip(PROFILES, PROFILES[1:] + PROFILES[:1], names,
                                                          names[1:] + names[:1]):
            runs.append((f"{after.stem}-vs-{before.stem}.html",
                         ["report", "-p", after_name, "-b", before_name, "-o", "-", "-f", "html"]))
        for name, args in runs:
            done = subprocess.run([sys.executable, "-m", "bringup", *args], capture_output=True, cwd=tmp,
                                  env={"COLUMNS": "160", "PATH": "/usr/bin:/bin", "HOME": tmp})
            digests[name] = {"rc": done.returncode, "sha256": hashlib.sha256(done.stdout).hexdigest(),
                             "bytes": len(done.stdout)}
    return digests


def record(out: Path, device: str) -> None:
    sys.path.insert(0, str(REPO))
    from tests.real_model import smollm2_gguf, smollm2_hf_dir

    gguf, hf_dir = smollm2_gguf(), smollm2_hf_dir()
    cases = {}
    for kernels in (False, True):
        regime = "kernels" if kernels else "plain"
        for quantization in ("none", "int8", "int4"):
            cases[f"hf/{quantization}/{regime}"] = model_case(hf_dir, quantization, kernels, device)
            print(f"hf/{quantization}/{regime}: done", file=sys.stderr)
        for quantization in ("none", "int4"):  # int4: the file's Q4_1 blocks re-packed as they are
            cases[f"gguf-q4_1/{quantization}/{regime}"] = model_case(gguf, quantization, kernels, device)
            print(f"gguf/{quantization}/{regime}: done", file=sys.stderr)
    result = {"device": device, "models": cases, "reports": reports()}
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}: {len(cases)} model cases, {len(result['reports'])} reports")


def compare(before: Path, after: Path) -> int:
    old, new = json.loads(before.read_text()), json.loads(after.read_text())
    differences = []
    if old.get("device", "cpu") != new.get("device", "cpu"):
        differences.append(f"device: before {old.get('device', 'cpu')}, after {new.get('device', 'cpu')}")
    for section in ("models", "reports"):
        for name in sorted(set(old[section]) | set(new[section])):
            if old[section].get(name) != new[section].get(name):
                differences.append(f"{section}/{name}:\n  before {old[section].get(name)}\n  after  "
                                   f"{new[section].get(name)}")
    for line in differences:
        print(line)
    counted = sum(len(old[s]) for s in ("models", "reports"))
    print(f"{len(differences)} differences in {counted} cases")
    return 1 if differences else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--device", default="cpu", help="the device every engine starts on: cpu (default), or "
                        "emu:0 / emu:1 (the emulated accelerator, switched on here)")
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.device.startswith("emu"):
        os.environ.setdefault("BRINGUP_EMU_SPEC", "default")  # read at `import torch`, which comes later
    record(args.out or Path("parity.json"), args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
