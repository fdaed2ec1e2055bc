"""`devices[i].speed`: every op on a device of speed s takes 1/s of its host time, as bench's own estimator sees it
(its harness timing a matmul and a bandwidth kernel on a speed-1.0 and a speed-0.25 device, alternated)."""

from __future__ import annotations

from tests.emulator.emu_process import emu_results

SPEC = {"devices": [{"name": "full", "memory": "1GiB"}, {"name": "quarter", "memory": "1GiB", "speed": 0.25}],
        "native": ["mm", "add", "mul"]}

BODY = """
from bringup.probes.bench.groups.bandwidth import kernels
from bringup.probes.bench.harness import Harness, HarnessSettings
torch.set_num_threads(1)  # one thread: less exposed to the other work on a shared machine
settings = HarnessSettings(warmup=2, min_reps=5, max_reps=20, budget_s=0.15)
best = {}
for _ in range(3):
    for index in (0, 1):
        device = torch.device("emu", index)
        harness = Harness.for_device(device, settings)
        a, b, c = (torch.rand(1 << 20, device=device) for _ in range(3))
        m = torch.rand(256, 256, device=device)
        for name, fn in (("matmul", lambda: m @ m), ("triad", kernels(a, b, c)["triad"])):
            seconds = harness.measure(fn).min_s
            key = f"{name}:{index}"
            best[key] = min(best.get(key, seconds), seconds)
from bringup_emu import runtime
report(best=best, speeds=[runtime.extension().device_speed(i) for i in (0, 1)])
"""


def test_a_quarter_speed_device_measures_about_four_times_slower() -> None:
    seen = emu_results(BODY, SPEC)
    best = seen["best"]
    for name in ("matmul", "triad"):
        ratio = best[f"{name}:1"] / best[f"{name}:0"]
        assert 2.5 < ratio < 8.0, (name, ratio, best)  # 4x, with room for a busy machine
    assert seen["speeds"] == [1.0, 0.25]
