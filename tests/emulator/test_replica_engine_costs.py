"""Each replica's step costs timed on its loaded engine (engine/replicas/engine_costs.py): a device whose engine runs
slower than the start's cuts said is timed as it runs (a real delay injected into its executor bounds the timed
costs from below), the timed work is the load's batch and prompt, and the engines serve the same tokens afterwards,
with no prefix-cache hit on the blocks the timing overwrote."""

from __future__ import annotations

from tests.emulator.emu_process import emu_results

SLOW_S = 0.05

BODY = """
import time
from concurrent.futures import ThreadPoolExecutor
from bringup.runner.engine.engine import LLMEngine
from bringup.runner.engine.options import EngineOptions
from bringup.runner.engine.replicas.engine_costs import time_on_engines
from bringup.runner.engine.replicas.replica import Replica
from bringup.runner.plan.placement.replica_load import ReplicaLoad
from bringup.runner.plan.placement.step_cost import measured_cost
from bringup.runner.sampling_params import SamplingParams
from tests.runner.stated import stated

def replica(device):
    thread = ThreadPoolExecutor(max_workers=1)
    options = EngineOptions(device=device, max_model_len=128, max_num_seqs=4, prefix_caching=True,
                            measurements=stated(free_bytes=256 << 20))
    return Replica(device, thread.submit(LLMEngine.create, options).result(), thread, 1e-3)

fast, slow = replica("emu:0"), replica("emu:1")
fast.cost = slow.cost = measured_cost(1e-3, 2e-3, 4, 1e-3, 32, "(the start's cuts)")
run, runs = slow.engine.executor.run_chunks, []
def slowed(chunks, *args, **kwargs):  # every step on emu:1 lasts SLOW_S more
    runs.append([len(c.token_ids) - c.start for c in chunks])
    time.sleep(SLOW_S)
    return run(chunks, *args, **kwargs)
slow.engine.executor.run_chunks = slowed
prompt, params = [1 + (7 * t) % 250 for t in range(40)], SamplingParams(max_tokens=6, temperature=0)
def served(one):
    return one.call(one.engine.generate, [prompt], params)[0].token_ids
before = [served(one) for one in (fast, slow)]
hits = [one.call(one.engine.stats)["prefix_cache_hits"] for one in (fast, slow)]
runs.clear()
time_on_engines([fast, slow], ReplicaLoad(4, 32, 16))
timed_runs = list(runs)
after = [served(one) for one in (fast, slow)]
report(costs={one.device: one.cost.as_value() for one in (fast, slow)}, runs=timed_runs, before=before, after=after,
       hits=hits, hits_after=[one.call(one.engine.stats)["prefix_cache_hits"] for one in (fast, slow)],
       free=[one.call(lambda e=one.engine: e.blocks.num_free == e.blocks.num_blocks) for one in (fast, slow)])
"""


def test_each_engine_is_timed_as_it_runs_on_the_loads_work_and_serves_the_same_tokens_after(tmp_path) -> None:
    from bringup.runner.engine.replicas.engine_costs import ROUNDS, STEPS, timed_batches
    from bringup.runner.plan.placement.step_cost import step_cost_from

    spec = {"devices": [{"name": "fast", "memory": "2GiB"}, {"name": "slow", "memory": "2GiB"}],
            "refused_dtypes": ["float64"]}
    seen = emu_results(f"SLOW_S = {SLOW_S}\n" + BODY, spec)
    costs = {device: step_cost_from(value) for device, value in seen["costs"].items()}
    for device, cost in costs.items():
        assert f"timed on the loaded engine on {device}" in cost.evidence, cost.evidence
        assert "(32 tokens timed)" in cost.evidence and "decode step ms by batch 1: " in cost.evidence
        assert [batch for batch, _ in cost.decode_steps] == [1, 2, 3, 4]  # each batch up to the load's
    slow = costs["emu:1"]
    assert all(seconds >= SLOW_S for _, seconds in slow.decode_steps)  # the delay its engine's steps carry
    assert slow.decode_s(3) == dict(slow.decode_steps)[3]  # the router reads the timed step, not a line
    assert slow.prefill_s_per_token >= SLOW_S / 32
    decodes = [[1] * batch for batch in timed_batches(4) for _ in range(STEPS)]  # new tokens of each sequence
    each_round = [*decodes, [32]]
    assert seen["runs"] == each_round * ROUNDS
    assert seen["after"] == seen["before"]  # the same greedy tokens after the timing wrote into the cache
    assert seen["hits_after"] == seen["hits"]  # the prompt's cached blocks were dropped, not found again
    assert seen["free"] == [True, True]
