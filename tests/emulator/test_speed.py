"""`devices[i].speed`: every op on a device of speed s takes 1/s of its host time. bench's harness times a matmul and a
bandwidth kernel on a speed-1.0 and a speed-0.25 device; the emulator's own totals show each op on the slow device
lasted at least 3x its host time beyond it (1/0.25 - 1), whatever else the machine is running, and nothing on the
full-speed one waited; a device's op on one host thread lasts its CPU time over the speed even when a neighbour
shares that thread's core (the preemption is not stretched by 1/speed, and the wait's last stretch does not hand
the neighbour a time slice); an op through the host fallback is paced once, with the copies it makes inside it
(pacing them again too made a fallback op 1/speed^2 slower). The ratio of the two devices' timings is the machine's
business (benchmarks/placement.py)."""

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
    ops, host_ns, beyond_ns = seen["totals"][1]
    assert ops >= 10 and host_ns > 0
    assert beyond_ns >= 3 * host_ns - 2 * ops  # each op ends 4x its host time after it began (ns rounding)
    assert seen["fallback_paced"] == 1  # paced once, copies inside it included: not once more for each copy


THREADS_SPEC = {"devices": [{"name": "one core", "memory": "1GiB", "host_threads": 1},
                            {"name": "all", "memory": "1GiB"}], "native": ["mm"]}

THREADS_BODY = """
import time
torch.set_num_threads(2)  # two intra-op threads whatever the machine has: the device with one must use one
cpu = {}
for index in (0, 1):
    m = torch.rand(384, 384, device=torch.device("emu", index))
    for _ in range(3):
        m @ m
    process, thread = time.process_time(), time.thread_time()
    for _ in range(30):
        m @ m
    cpu[index] = [time.process_time() - process, time.thread_time() - thread]
report(cpu=cpu, threads_after=torch.get_num_threads())
"""


def test_a_device_given_one_host_thread_runs_its_ops_on_the_calling_thread_alone() -> None:
    seen = emu_results(THREADS_BODY, THREADS_SPEC)
    (process_one, thread_one), (process_all, thread_all) = seen["cpu"]["0"], seen["cpu"]["1"]
    assert process_one - thread_one <= 0.05 * thread_one + 0.002  # no other thread worked on its matmuls
    assert process_all - thread_all > 0.3 * thread_all  # the second intra-op thread did: the count took hold
    assert seen["threads_after"] == 2  # the calling thread's setting is put back after each op


NEIGHBOUR_SPEC = {"devices": [{"name": "quarter, one core", "memory": "1GiB", "speed": 0.25, "host_threads": 1}],
                  "native": ["mm"]}

NEIGHBOUR_BODY = """
import os, subprocess, sys, time
core = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {core})  # this thread, and a neighbour spinning on the same core
neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"])
os.sched_setaffinity(neighbour.pid, {core})
extension = runtime.extension()
m = torch.rand(256, 256, device=torch.device("emu", 0))
try:
    for _ in range(5):
        m @ m
    before, wall, cpu = extension.pacing_totals(0), time.perf_counter(), time.thread_time()
    for _ in range(40):
        m @ m
    wall, cpu, after = time.perf_counter() - wall, time.thread_time() - cpu, extension.pacing_totals(0)
finally:
    neighbour.kill()
report(wall=wall, cpu=cpu, ops=after[0] - before[0], host_ns=after[1] - before[1])
"""


def test_a_neighbour_on_the_devices_core_is_not_stretched_by_the_speed() -> None:
    seen = emu_results(NEIGHBOUR_BODY.replace("import os", "from bringup_emu import runtime\nimport os"),
                       NEIGHBOUR_SPEC)
    host_s = seen["host_ns"] / 1e9
    assert seen["ops"] == 40 and 0 < host_s <= seen["cpu"] * 1.02 + 1e-3  # the thread's CPU time, not the wall's
    # sharing the core, each op's computation took about twice its CPU time on the wall clock; the device's op still
    # lasts 4x its CPU time (timed by the wall clock, as before, it lasted 4x the doubled time: 2x too long)
    assert seen["wall"] < 1.3 * host_s / 0.25 + 0.02, seen
