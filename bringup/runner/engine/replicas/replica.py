"""One replica: an engine on its device, the one thread that built it and runs every call into it, and what the
router knows of its load (the requests it holds, the tokens they still need) and of its pace (pace.py)."""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from bringup.runner.engine.replicas.pace import Pace, predicted_step_s
from bringup.runner.plan.placement.step_cost import StepCost


@dataclass
class Replica:
    device: str
    engine: Any  # an LLMEngine
    thread: ThreadPoolExecutor  # one worker: every call into the engine, in order, on the thread that built it
    seconds_per_token: float  # predicted from its measured bandwidth (the placement row)
    held: dict[str, int] = field(default_factory=dict)  # request id -> tokens it still needs (prompt + to generate)
    stepping: Future | None = None
    lost: str | None = None  # why the device no longer answers
    served: int = 0  # requests routed here
    tokens: int = 0  # tokens generated here
    last_stats: dict = field(default_factory=dict)  # its engine's stats when last read (not while it steps)
    cost: StepCost | None = None  # its measured step costs by batch and its prefill rate, where measured
    unprefilled: dict[str, int] = field(default_factory=dict)  # request id -> prompt tokens, until its first output
    adding: dict[str, Future] = field(default_factory=dict)  # requests handed to its thread, until added
    pace: Pace = field(default_factory=Pace)  # its steps' time over its costs' prediction, measured while serving

    def call(self, function: Any, *args: Any) -> Any:
        return self.thread.submit(function, *args).result()

    def timed_step(self) -> tuple[list[Any], float]:
        """Its engine's next step (on its thread) and the seconds it took."""
        began = time.perf_counter()
        outputs = self.engine.step()
        return outputs, time.perf_counter() - began

    def paced(self, outputs: list[Any], seconds: float) -> None:
        """Adds a finished step to the pace, from what its outputs say it did (before they are booked)."""
        if self.cost is None:
            return
        mine = [out for out in outputs if out.request_id in self.held and out.token_ids]
        prefilled = sum(self.unprefilled.get(out.request_id, 0) for out in mine)
        decoded = sum(1 for out in mine if out.request_id not in self.unprefilled)
        self.pace.add(seconds, predicted_step_s(self.cost, prefilled, decoded))

    @property
    def outstanding(self) -> int:
        return sum(self.held.values())

    def kv_tokens(self) -> int:
        return self.engine.blocks.num_blocks * self.engine.plan.block_size

    def holds(self, prompt_len: int, total: int) -> bool:
        """Whether this replica can take a prompt of `prompt_len` tokens growing to `total`."""
        return self.lost is None and prompt_len + 1 <= self.engine.max_model_len and total <= self.kv_tokens()

    def predicted_s(self, tokens: int, prompt: int = 0) -> float:
        """When a request of `tokens` more (`prompt` of them its prompt) would finish here. A decode step runs the
        whole batch at once (its weights are streamed once), so the request takes its own tokens' steps, plus the
        steps of the full batches queued ahead of it. Each step costs the replica's seconds per token, or, where its
        step costs were measured, the decode step of the batch the request joins, after the prefill of its prompt and
        of the prompts routed here before it that have not started; measured step costs are scaled by its pace."""
        seats = max(int(self.engine.plan.max_num_seqs.value), 1)
        ahead = len(self.held) // seats
        mean = self.outstanding / len(self.held) if self.held else 0.0
        if self.cost is None:
            return (tokens + ahead * mean) * self.seconds_per_token
        batch = min(len(self.held) + 1, seats)
        steps = tokens - prompt + ahead * mean
        prefill = prompt + sum(self.unprefilled.values())  # the prompts routed here ahead of it prefill first
        return self.pace.factor * (prefill * self.cost.prefill_s_per_token + steps * self.cost.decode_s(batch))

    def added_s(self, tokens: int, prompt: int = 0) -> float:
        """What routing the request here adds to the sum of its requests' completion times: its own predicted
        completion, plus the delay it brings those held here, where step costs were measured (each waits for its
        prompt's prefill, and each of their decode steps it shares grows by what one more sequence adds to the step). At
        a steady number of requests in flight, throughput is that number over the mean completion time, so the replica
        that adds the least keeps the throughput highest; predicted completion alone fills the fast replica's batch with
        prompts its running requests wait behind. Sending each arrival where the steady rate rises most instead
        (replica_load.steady_rate) reaches the steady optimum's shares, but the optimum is flat (on the chat benchmark's
        costs 5 / 3 in flight give 1.32x, 6 / 2, where this rule settles, 1.31x) while that rule's requests on the slow
        replica take 44 % longer than on the fast one, and a burst or a run's end waits for them: measured side by side,
        3 % more throughput over 64 chats, 5 % less over 32 and 12-17 % less on a wave of 8 (docs/benchmarks.md)."""
        own = self.predicted_s(tokens, prompt)
        if self.cost is None:
            return own
        steps = tokens - prompt
        prefill = prompt * self.cost.prefill_s_per_token
        grown = self.cost.added_s(min(len(self.held), max(int(self.engine.plan.max_num_seqs.value), 1)))
        delays = sum(prefill + grown * min(left, steps) for left in self.held.values())
        return own + self.pace.factor * delays
