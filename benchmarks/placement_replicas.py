"""The replicas case of benchmarks/placement.py (`--case replicas`): two emulated devices slow enough that the
emulator waits more than it computes (speeds 0.25 and 0.125; the default spec's native ops, as an accelerator runs
them), SmolLM2 on each, the router over both against the faster device alone, at concurrency 8 (issue 54's
acceptance: aggregate throughput >= 1.3x the faster alone), and a long prompt only the larger replica's context
holds, which must be served there.

Each replica is a real engine (LLMEngine) on its own thread, as `serve --placement replicas` starts them; start-up's
layout and decode timings are given as data (plain F.linear, no paged kernel) so both arms run the same plan and the
start does not spend minutes timing candidates at an eighth of the host's speed. Two sets of step costs
(plan/placement/step_cost.py) are printed side by side: the start's, which decide replicas (engine/step_timing.py:
the model's 3- and 6-layer cuts timed on each device, carried to the whole model), and those `serve` then times on
each loaded engine for the router (engine/replicas/engine_costs.py, at the chat's load). Two workloads of 16
generated tokens a request (--workload picks one): short prompts (5 tokens: decode only) and a chat (CHAT_PROMPT-
token prompts: prefill a real share of the work), each served two ways: sustained (--requests, 64 unless given,
CONCURRENCY in flight throughout as that many clients in a closed loop: what a server's throughput at concurrency 8
means), reported for the whole run and for its steady window (from the CONCURRENCY-th request's end, when the
prompts first sent at once are behind, to the last one's sending, before the load drains), with the mean number in
flight on each device over the window; and one wave (8 requests at once, timed until the last ends: whole requests
split 6/2 at best, so the slower replica idles at the end). Each prints the prediction from the start-up's costs and
from the engine's: the planner's (the steady state's best shares against all on the faster device; the router's
completion-time rule settles near them) and the wave's best split. Three arms: the router as `serve` runs it (the
engines' costs, scaled by each replica's measured pace, engine/replicas/pace.py), the router on the start's cut
costs alone with no pace (as it routed before either), and the faster device alone; each round starts every replica
from its arm's costs and a fresh pace, as a new server does. Rounds alternate the arms; each figure is its best
round.

Each device computes on one host thread (`host_threads: 1` in the spec, docs/emulator.md), so the two replicas, on
threads of their own, compute side by side as separate devices do; on threads sharing both of the host's cores each
op of one replica took longer whenever the other computed, and the speed's wait stretched that too (the chat's
sustained replicas 1.21x at `host_threads` unset, against 1.28-1.32x with it, 2026-12-07 on this Xeon; separate runs).
Not a test: the figures are this machine's."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DEVICES = [{"name": "Emu quarter, small context", "memory": "2GiB", "speed": 0.25, "host_threads": 1},
           {"name": "Emu eighth, large context", "memory": "2GiB", "speed": 0.125, "host_threads": 1}]
CONTEXTS = {"emu:0": 256, "emu:1": 1024}  # the long prompt fits only emu:1's
LONG_PROMPT = 400
CHAT_PROMPT = 224  # the chat workload's prompts (within emu:0's 256-token context): prefill a real share
CONCURRENCY = 8
ROUTER = "replicas (router)"
START_COSTS = "replicas (start costs only)"  # the router on the cuts' costs, no pace: the baseline of both


def spec() -> dict:  # type: ignore[type-arg]
    from bringup_emu.default_spec import DEFAULT_NATIVE

    return {"devices": DEVICES, "refused_dtypes": ["float64"], "native": list(DEFAULT_NATIVE)}


def replica(model: Path, device: str):  # type: ignore[no-untyped-def]
    from bringup.runner.engine.engine import LLMEngine
    from bringup.runner.engine.options import EngineOptions
    from bringup.runner.engine.replicas.replica import Replica
    from bringup.runner.plan.layout import LayoutTimings
    from bringup.runner.plan.measurements import StartupMeasurements

    layouts = LayoutTimings({m: {"in_out": 2e-6 * m, "out_in": 1e-6 * m} for m in (1, 2, 4, 8, 16, 32, 64, 256)})
    given = StartupMeasurements(layouts=layouts, paged_decode=(False, "given as data (benchmark)"),
                                free_bytes=1 << 30)
    options = EngineOptions(model_dir=model, device=device, max_model_len=CONTEXTS[device], max_num_seqs=CONCURRENCY,
                            measurements=given, graphs="off", prefix_caching=False, use_record=False)
    thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"replica-{device}")
    return Replica(device, thread.submit(LLMEngine.create, options).result(), thread, 0.0)


def engine_costs(replicas: list, tokens: int) -> dict[str, object]:  # type: ignore[type-arg]
    """Each replica's step costs timed on its loaded engine, as `serve` times them after the start
    (engine/replicas/engine_costs.py), for the chat's load."""
    from bringup.runner.engine.replicas.engine_costs import time_on_engines
    from bringup.runner.plan.placement.replica_load import ReplicaLoad

    began = time.perf_counter()
    time_on_engines(replicas, ReplicaLoad(CONCURRENCY, CHAT_PROMPT, tokens))
    print(f"engine costs timed in {time.perf_counter() - began:.1f} s (what serve's start spends on them)")
    return {one.device: one.cost for one in replicas}


def startup_costs(model: Path, gbps: dict[str, float]) -> dict[str, object]:
    """Each device's step costs as `serve --device emu:0,emu:1` measures them at the start (engine/step_timing.py:
    the model's 3- and 6-layer cuts, carried to the whole model), from the bandwidth measured here."""
    from bringup.runner.engine.step_timing import device_timings
    from bringup.runner.plan.placement.facts import DeviceFacts
    from bringup.runner.plan.placement.need import model_need
    from bringup.runner.plan.placement.replica_load import ReplicaLoad
    from bringup.runner.plan.profile_facts import ProfileFacts
    from bringup.runner.sources.model_source import model_source

    config = model_source(model).config()
    devices = [DeviceFacts(d, 2 << 30, "2 GiB", gbps[d], None, "float32", "measured here", False)
               for d in ("emu:0", "emu:1")]
    need = model_need(config, CONTEXTS["emu:0"])
    load = ReplicaLoad(CONCURRENCY, CHAT_PROMPT, 16)  # the prefill timed at the chat's prompt
    timed = device_timings(devices, config, need, [ProfileFacts(None)] * 2, load, {"emu:0", "emu:1"})
    return {d.device: t.cost for d, t in zip(devices, timed)}


def predicted(costs: dict, prompt: int, tokens: int) -> str:  # type: ignore[type-arg]
    """The planner's verdict on replicas for this workload at concurrency CONCURRENCY, from `costs`: the steady
    state's best shares (requests in flight on each) against all on emu:0; and a wave of CONCURRENCY sent at once,
    timed to the last, at its best split."""
    from bringup.runner.plan.placement.replica_load import ReplicaLoad, load_seconds, replica_gain
    from bringup.runner.plan.placement.replicas import REPLICA_GAIN

    load = ReplicaLoad(CONCURRENCY, prompt, tokens)
    found = replica_gain([costs["emu:0"], costs["emu:1"]], load)
    alone = load_seconds(costs["emu:0"], load, CONCURRENCY)
    wave = {k: max(load_seconds(costs["emu:0"], load, k), load_seconds(costs["emu:1"], load, CONCURRENCY - k))
            for k in range(CONCURRENCY + 1)}
    k = min(wave, key=wave.__getitem__)
    return (f"steady {found.shares[0]}/{found.shares[1]} in flight, {found.split_rate * tokens:.2f} tokens/s against "
            f"{found.alone_rate * tokens:.2f} all on emu:0 ({found.gain:.2f}x; the planner picks replicas unasked from "
            f"{REPLICA_GAIN}x); a wave of {CONCURRENCY} split {k}/{CONCURRENCY - k} {wave[k]:.2f} s against "
            f"{alone:.2f} s ({alone / wave[k]:.2f}x)")


Served = tuple[float, int, dict[str, int], float | None, dict[str, float]]
# seconds, tokens, requests per device, the steady window's tokens/s, mean requests in flight per device


def sustained(router, prompts: dict[str, list[int]], max_tokens: int) -> Served:  # type: ignore[no-untyped-def]
    """Seconds to serve every prompt with CONCURRENCY of them in flight throughout (each one that finishes is
    replaced by the next, as CONCURRENCY clients in a closed loop; CONCURRENCY prompts or fewer: one wave), tokens
    generated, requests per device, the steady window's rate (tokens generated per second from the CONCURRENCY-th
    request's end, when the first prompts sent at once are behind, to the last prompt's sending, before the load
    drains; None for one wave), and the mean number in flight on each device over that window."""
    from bringup.runner.sampling_params import SamplingParams

    waiting = list(prompts.items())
    spread = {"emu:0": 0, "emu:1": 0}
    seen: dict[str, int] = {}
    window: list[tuple[float, int]] = []  # (time, tokens so far) at the window's start and end
    in_flight = {"emu:0": 0.0, "emu:1": 0.0}  # requests held times seconds, over the window

    def submit() -> None:
        name, ids = waiting.pop(0)
        router.add_request(name, ids, SamplingParams(max_tokens=max_tokens, temperature=0, ignore_eos=True))
        spread[next(r.device for r in router.replicas if name in r.held)] += 1
    began = last = time.perf_counter()
    for _ in range(min(CONCURRENCY, len(waiting))):
        submit()
    finished = 0
    while router.has_unfinished():
        outputs = router.step()
        now = time.perf_counter()
        if len(window) == 1:
            for replica in router.replicas:
                in_flight[replica.device] += len(replica.held) * (now - last)
        last = now
        for out in outputs:
            seen[out.request_id] = len(out.token_ids)
            if out.finished:
                assert out.finish_reason == "length", (out.request_id, out.finish_reason, out.error)
                finished += 1
                if waiting:
                    submit()
                    if finished == CONCURRENCY or not waiting:
                        window.append((now, sum(seen.values())))
    took = time.perf_counter() - began
    if len(window) < 2 or window[1][0] <= window[0][0]:
        return took, sum(seen.values()), spread, None, {}
    (start, made_then), (end, made_by) = window
    return (took, sum(seen.values()), spread, (made_by - made_then) / (end - start),
            {device: held / (end - start) for device, held in in_flight.items()})


def compare(arms: dict, workload: str, rounds: int, serve) -> None:  # type: ignore[no-untyped-def, type-arg]
    """The replicas' best round over the faster alone's, the arms (name -> (router, the step costs it predicts
    from)) alternating each round; `serve(router)` runs one round (sustained's figures). The whole run's rate, and
    where measured the steady window's beside it."""
    from bringup.runner.engine.replicas.pace import Pace

    best: dict[str, float] = {}
    steady: dict[str, float] = {}
    for index in range(rounds):
        for name, (router, costs) in arms.items():
            for replica in router.replicas:  # each round starts from its costs, as a new server does
                replica.pace, replica.cost = Pace(), costs[replica.device]
            took, made, spread, rate, held = serve(router)
            paces = ", ".join(f"{r.device} {r.pace.factor:.2f}" for r in router.replicas if r.pace.steps)
            window = (f"; steady window {rate:.2f} tokens/s, in flight " + " / ".join(f"{held[d]:.1f}" for d in held)
                      if rate is not None else "")
            print(f"{workload}, round {index + 1} {name:>18}: {made / took:7.2f} tokens/s ({made} tokens in "
                  f"{took:.2f} s; requests per device {spread}){window}" + (f"; pace {paces}" if paces else ""))
            best[name] = max(best.get(name, 0.0), made / took)
            if rate is not None:
                steady[name] = max(steady.get(name, 0.0), rate)
    for what, figures in (("whole run, best", best), ("steady window, best", steady)):
        for name in (n for n in figures if n != "faster alone"):
            ratio = figures[name] / figures["faster alone"]
            print(f"{workload}, {what}: {name} {figures[name]:.2f} tokens/s, faster alone "
                  f"{figures['faster alone']:.2f}: {ratio:.2f}x" + (" (target >= 1.3x)" if name == ROUTER else ""))


def run(model: Path, tokens: int, rounds: int, gbps: dict[str, float], which: str = "both",
        requests: int = 64) -> None:
    from bringup.runner.engine.replicas.router import ReplicaRouter

    started = startup_costs(model, gbps)
    fast, slow = replica(model, "emu:0"), replica(model, "emu:1")
    timed = engine_costs([fast, slow], tokens)
    for one in (fast, slow):
        print(f"start-up {one.device}: {started[one.device].evidence}")
        print(f"engine   {one.device}: {timed[one.device].evidence}")
    arms = {ROUTER: (ReplicaRouter([fast, slow]), timed),
            START_COSTS: (ReplicaRouter([fast, slow], measure_pace=False), started),
            "faster alone": (ReplicaRouter([fast]), timed)}
    workloads = {"short": ("short prompts", lambda i: [1, 504, 3458, 282, 4649 + i % 400]),
                 "chat": (f"chat ({CHAT_PROMPT}-token prompts)",
                          lambda i: [1 + (i * 7 + t) % 400 for t in range(CHAT_PROMPT)])}
    for key, (workload, prompt_of) in workloads.items():
        if which not in (key, "both"):
            continue
        length = len(prompt_of(0))
        print(f"{workload}, predicted from the start-up's costs: {predicted(started, length, tokens)}")
        print(f"{workload}, predicted from the engine's costs:   {predicted(timed, length, tokens)}")
        wave = {f"w{i}": prompt_of(i) for i in range(CONCURRENCY)}
        compare(arms, f"{workload}, one wave of {CONCURRENCY}", rounds,
                lambda router, wave=wave: sustained(router, wave, tokens))
        flow = {f"f{i}": prompt_of(CONCURRENCY + i) for i in range(requests)}
        compare(arms, f"{workload}, {len(flow)} at concurrency {CONCURRENCY}", rounds,
                lambda router, flow=flow: sustained(router, flow, tokens))
    took, made, spread, _, _ = sustained(arms[ROUTER][0], {"long": list(range(10, 10 + LONG_PROMPT))}, 4)
    where = next(device for device, count in spread.items() if count)
    print(f"long prompt ({LONG_PROMPT} tokens; contexts {CONTEXTS}): served on {where} ({made} tokens in "
          f"{took:.2f} s)")
    print(f"load:    {os.getloadavg()[0]:.2f} (1-min average) at the end")
