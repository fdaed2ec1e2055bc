"""`devices[i].speed`: every op on a device of speed s takes 1/s of its host time. bench's harness times a matmul and a
bandwidth kernel on a speed-1.0 and a speed-0.25 device; the emulator's own totals show each op on the slow device
waited at least 3x its host time after it (1/0.25 - 1), whatever else the machine is running, and nothing on the
full-speed one waited; an op through the host fallback is paced once, with the copies it makes inside it (pacing them
again too made a fallback op 1/speed^2 slower). The ratio of the two devices' timings is the machine's business
(benchmarks/placement.py)."""

from __future__ import annotations

from tests.emulator.emu_process import emu_results

SPEC = {"devices": [{"name": "full", "memory": "1GiB"}, {"name": "quarter", "memory": "1GiB", "speed": 0.25}],
        "native": ["mm", "add", "mul"]}

BODY = """
from bringup.probes.bench.groups.bandwidth import kernels
from bringup.probes.bench.harness import Harness, HarnessSettings
from bringup_emu import runtime
settings = HarnessSettings(warmup=1, min_reps=3, max_reps=5, budget_s=0.05)
measured = {}
for index in (0, 1):
    device = torch.device("emu", index)
    harness = Harness.for_device(device, settings)
    a, b, c = (torch.rand(1 << 18, device=device) for _ in range(3))
    m = torch.rand(128, 128, device=device)
    for name, fn in (("matmul", lambda: m @ m), ("triad", kernels(a, b, c)["triad"])):
        measured[f"{name}:{index}"] = harness.measure(fn).min_s
extension = runtime.extension()
totals = [list(extension.pacing_totals(i)) for i in (0, 1)]
quarter = torch.device("emu", 1)
x, y = torch.rand(64, device=quarter), torch.rand(64, device=quarter)
before = extension.pacing_totals(1)[0]
torch.sub(x, y)  # not native: through the host fallback, whose copies to and from the host are ops inside it
report(measured=measured, totals=totals, speeds=[extension.device_speed(i) for i in (0, 1)],
       fallback_paced=extension.pacing_totals(1)[0] - before)
"""


def test_each_op_on_a_quarter_speed_device_waits_three_times_its_host_time() -> None:
    seen = emu_results(BODY, SPEC)
    assert seen["speeds"] == [1.0, 0.25]
    assert all(seconds > 0 for seconds in seen["measured"].values())
    assert seen["totals"][0] == [0, 0, 0]  # a full-speed device is not paced
    ops, host_ns, waited_ns = seen["totals"][1]
    assert ops >= 10 and host_ns > 0
    assert waited_ns >= 3 * host_ns - 2 * ops  # each op's deadline is 3x its host time past its end (ns rounding)
    assert seen["fallback_paced"] == 1  # paced once, copies inside it included: not once more for each copy
