"""One-shot accelerator check of verify-collectives' rank machinery (no profile, so no pydantic needed):
the backend chosen for the device family, fork and spawn starts on the device, exact checks on device
buffers, and an injected corruption counted on the device. Run on a machine with one or more GPUs:

    PYTHONPATH=. python3 scripts/collectives_device_check.py
"""

import time

import torch

from bringup.fallbacks import FallbackRecorder
from bringup.probes.collectives.backend_choice import choose_backend
from bringup.probes.collectives.plan import Plan
from bringup.probes.collectives.ranks.launcher import launch


def main() -> int:
    family = "rocm" if torch.version.hip else "cuda"
    count = torch.cuda.device_count()
    choice = choose_backend("auto", family, "cuda", FallbackRecorder())
    print(f"torch {torch.__version__}, {count} device(s), backend {choice.name}: {choice.reason}", flush=True)
    bad = 0
    for method in ("fork", "spawn"):
        plan = Plan(backend=choice.name, device_type=choice.device_type, dtypes=["float32", "bfloat16"],
                    sizes=[4, 1 << 20, 64 << 20], timeout_s=60)
        started = time.time()
        outcome = launch(plan, count, start_method=method)
        print(f"{method}: {time.time() - started:.1f} s, faults {outcome.faults}, ready {outcome.ready}")
        for message in sorted(outcome.results[0].values(), key=lambda m: m["index"]):
            print(f"  {message['op']:15} {message['dtype']:9} {message['size_bytes']:>10} {message['status']:6} "
                  f"wrong={message['wrong']} median_us={(message['median_s'] or 0) * 1e6:.1f} "
                  f"{message.get('error') or ''}")
            bad += message["status"] not in ("pass", "skipped")
        bad += len(outcome.faults)
        if outcome.faults:
            print(outcome.log_tails)
    plan = Plan(backend=choice.name, device_type=choice.device_type, dtypes=["float32"], sizes=[1 << 20],
                ops=["all_reduce_sum"], timeout_s=60)
    outcome = launch(plan, count, fault_spec="rank=0:corrupt:elements=7")
    wrong = [m["wrong"] for m in outcome.results[0].values()]
    print(f"corrupt rank 0, 7 elements: rank 0 counted {wrong} wrong (expected [7])")
    bad += wrong != [7]
    print("OK" if bad == 0 else f"{bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
