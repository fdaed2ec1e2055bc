"""Each replica's step costs timed on its own engine once it is loaded, for the router's predictions.

The placement chose replicas from step costs measured before any engine existed: 3- and 6-layer cuts of the model,
decoding from a few tokens of context, timed for a few seconds and carried to the whole model
(engine/step_timing.py). That is enough to decide, not to route by: on a 2-core EPYC the cuts put the eighth-speed
device's decode step at 1.58x the quarter-speed one's where the loaded engines took 2.5x, and the quarter-speed
device's batch-8 step at 380 ms where its engine took 727 ms from the chat's 232 tokens of context. So once every
engine is loaded, its executor runs the load's work -- a decode step at each batch up to the load's (`timed_batches`:
the router predicts at the batch a request joins, and the step is not a line in the batch: on that EPYC the
eighth-speed device took 551 / 812 / 1,125 / 723 ms at batch 1-4), from the load's mean context, and the prefill of
one of its prompts (at most PREFILL_TOKENS) in one forward -- the replicas in turn for ROUNDS rounds, each figure its
floor (a neighbour, or a first call's warm-up, only ever adds time). On the emulated pair of
benchmarks/placement_replicas.py (SmolLM2 at a quarter and an eighth of a 2-core host's speed) that takes about a
minute, mostly the slow device's steps; an accelerator's steps take milliseconds. The steps write
K/V into free blocks, before any request holds one; the prefix cache is dropped after them all the same."""

from __future__ import annotations

import time
from dataclasses import dataclass

from bringup.log import get_logger
from bringup.runner.engine.best_of import best_of
from bringup.runner.engine.executor import Executor
from bringup.runner.engine.replicas.replica import Replica
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.plan.placement.replica_load import ReplicaLoad
from bringup.runner.plan.placement.step_cost import StepCost, tabled_cost

log = get_logger("runner.replicas")

ROUNDS = 3  # each replica's work timed this many times, in turn with the others'
STEPS = 1  # timed decode steps of each batch per round
EVERY_BATCH_TO = 8  # each batch up to this one is timed; beyond it, powers of two and the load's batch
PREFILL_TOKENS = 128  # the timed prompt's tokens at most: its rate a token, not its length, is what is kept


@dataclass
class EngineTimer:
    """The timed work on one engine's executor, sized to its plan and cache, and the floors found so far."""
    executor: Executor
    batch: int  # the load's requests, as many as the engine's batch and cache hold
    context: int  # tokens each decoding sequence holds before its timed steps
    prompt: int  # the prefilled prompt's tokens
    floors: dict[str, float]

    def round(self) -> None:
        for batch in timed_batches(self.batch):
            for step in range(1, STEPS + 1):
                self._keep(f"decode {batch}", self._decode(batch, step))
        self._keep("prefill", self._prefill())

    def cost(self, device: str) -> StepCost:
        steps = {batch: self.floors[f"decode {batch}"] for batch in timed_batches(self.batch)}
        how = (f"(timed on the loaded engine on {device}: the floor of {ROUNDS} rounds, the replicas in turn, of "
               f"{STEPS} decode step{'s' if STEPS > 1 else ''} at each batch from {self.context} tokens of context "
               f"and one prefill)")
        return tabled_cost(steps, self.floors["prefill"], self.prompt, how)

    def _keep(self, name: str, seconds: float) -> None:
        self.floors[name] = min(self.floors.get(name, float("inf")), seconds)

    def _decode(self, batch: int, step: int) -> float:
        per_seq = self._blocks(self.context + STEPS + 1)
        cached = self.context + step
        tokens = [1 + t % 97 for t in range(cached + 1)]
        return self._timed([SeqChunk(tokens, cached, list(range(i * per_seq, (i + 1) * per_seq)))
                            for i in range(batch)])

    def _prefill(self) -> float:
        tokens = [1 + t % 97 for t in range(self.prompt)]
        return self._timed([SeqChunk(tokens, 0, list(range(self._blocks(self.prompt))))])

    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self.executor.plan.block_size)

    def _timed(self, chunks: list[SeqChunk]) -> float:
        return best_of(lambda: self.executor.run_chunks(chunks), self.executor.model.device, 1)


def timed_batches(largest: int) -> list[int]:
    """The batches whose decode steps are timed for a load of `largest`: each up to EVERY_BATCH_TO, then powers of
    two (where graphs' buckets and kernels' tiles change), and `largest` itself."""
    small = list(range(1, min(largest, EVERY_BATCH_TO) + 1))
    doubled = [2 ** k for k in range(4, largest.bit_length()) if EVERY_BATCH_TO < 2 ** k < largest]
    return small + doubled + ([largest] if largest > EVERY_BATCH_TO else [])


def engine_timer(executor: Executor, load: ReplicaLoad) -> EngineTimer:
    """The timer for `load` on `executor`: its batch cut to what the plan and the cache hold, its context and prompt
    to what the context holds."""
    plan = executor.plan
    longest = plan.max_model_len.value
    context = max(1, min(load.prompt_tokens + load.new_tokens // 2, longest - STEPS - 2))
    per_seq = -(-(context + STEPS + 1) // plan.block_size)
    batch = max(1, min(load.requests, plan.max_num_seqs.value, plan.kv_blocks.value // per_seq))
    prompt = max(2, min(load.prompt_tokens, PREFILL_TOKENS, longest - 1, plan.kv_blocks.value * plan.block_size))
    return EngineTimer(executor, batch, context, prompt, {})


def time_on_engines(replicas: list[Replica], load: ReplicaLoad) -> None:
    """Each replica's `cost` timed on its engine for `load` (each call on the replica's own thread, the replicas in
    turn), logged beside the start's cost it replaces."""
    began = time.perf_counter()
    timers = [r.call(engine_timer, r.engine.executor, load) for r in replicas]
    for _ in range(ROUNDS):
        for replica, timer in zip(replicas, timers):
            replica.call(timer.round)
    for replica, timer in zip(replicas, timers):
        replica.call(replica.engine.blocks.drop_cache)
        before, replica.cost = replica.cost, timer.cost(replica.device)
        log.info("replica on %s: step costs %s%s", replica.device, replica.cost.evidence,
                 f"; the start's cuts said {before.evidence}" if before is not None else "")
    log.info("replicas: step costs timed on %d engines in %.1f s", len(replicas), time.perf_counter() - began)
