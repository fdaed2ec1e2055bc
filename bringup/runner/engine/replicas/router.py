"""The router above the replicas: the engine protocol the server and `generate` drive, over one engine per device.

Each request goes to the replica that holds it (its prompt fits the replica's context and KV cache) and adds the
least to the completion times of the requests there, its own included (replica.py: its predicted completion, plus
the delay it brings those already there), each replica's predictions scaled by the pace its steps measured
(pace.py). A step hands each busy replica its next step on its own thread and returns the outputs of whichever
finish first, so a fast replica is never held to a slow one's pace. A replica whose device is lost
(engine/device_loss.py) fails its requests with that error, is logged at WARNING and counted, and the others serve
on; with none left, the step raises and the run stops."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, wait
from typing import Any

from bringup.log import get_logger
from bringup.runner.engine.device_loss import DeviceLoss, device_loss
from bringup.runner.engine.outputs import RequestError, RequestOutput
from bringup.runner.engine.replicas.replica import Replica
from bringup.runner.sampling_params import SamplingParams

log = get_logger("runner.replicas")


class ReplicaRouter:
    def __init__(self, replicas: list[Replica], measure_pace: bool = True) -> None:
        """`measure_pace`: scale each replica's predictions by its measured pace (replicas/pace.py); off, the start's
        step costs alone (the benchmark's baseline)."""
        self.replicas = replicas  # fastest first: the first one's plan, tokenizer and fallbacks speak for the set
        first = replicas[0].engine
        self.tokenizer, self.model_name, self.vocab_size = first.tokenizer, first.model_name, first.vocab_size
        self.plan, self.fallbacks, self.reconfirmation = first.plan, first.fallbacks, None
        self.max_model_len = max(r.engine.max_model_len for r in replicas)
        self.lost_replicas = 0
        self.measure_pace = measure_pace

    # ---------------------------------------------------------------- requests
    def add_request(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams) -> None:
        """Routes the request and hands it to its replica. Bad input raises ValueError here, on the caller's thread;
        the replica takes the request on its own thread before its next step (after the one it is in, if any), so
        adding never waits for a step (a slow replica's step would hold up the others' next steps)."""
        if any(request_id in r.held for r in self.replicas):
            raise ValueError(f"request_id: {request_id!r} is already running")
        prompt = len(prompt_token_ids)
        chosen = self._route(prompt, params.max_tokens)
        chosen.engine.check_request(request_id, prompt_token_ids, params)
        chosen.adding[request_id] = chosen.thread.submit(chosen.engine.add_request, request_id, prompt_token_ids,
                                                         params)  # on its thread, before its next step
        chosen.held[request_id] = min(prompt + params.max_tokens, chosen.engine.max_model_len)
        chosen.unprefilled[request_id] = prompt
        chosen.served += 1

    def _route(self, prompt: int, max_tokens: int) -> Replica:
        live = [r for r in self.replicas if r.lost is None]
        able = [r for r in live if r.holds(prompt, min(prompt + max_tokens, r.engine.max_model_len))]
        if not able:  # none holds it: the largest live one refuses it in its own words
            return max(live, key=lambda r: (r.engine.max_model_len, r.kv_tokens()))
        return min(able, key=lambda r: r.added_s(min(prompt + max_tokens, r.engine.max_model_len), prompt))

    def abort_request(self, request_id: str) -> None:
        for replica in self.replicas:
            replica.unprefilled.pop(request_id, None)
            if replica.held.pop(request_id, None) is not None and replica.lost is None:
                replica.thread.submit(replica.engine.abort_request, request_id)

    def has_unfinished(self) -> bool:
        return any(r.held or r.stepping is not None for r in self.replicas)

    # ---------------------------------------------------------------- stepping
    def step(self) -> list[RequestOutput]:
        for replica in self.replicas:
            if replica.stepping is None and replica.held and replica.lost is None:
                replica.stepping = replica.thread.submit(replica.timed_step)
        running = [r.stepping for r in self.replicas if r.stepping is not None]
        if not running:
            return []
        wait(running, return_when=FIRST_COMPLETED)
        outputs: list[RequestOutput] = []
        for replica in self.replicas:
            if replica.stepping is not None and replica.stepping.done():
                done, replica.stepping = replica.stepping, None
                outputs += self._collected(replica, done.exception(), done)
        return outputs

    def _collected(self, replica: Replica, failure: BaseException | None, done: Any) -> list[RequestOutput]:
        if failure is None:
            stepped, seconds = done.result()
            if self.measure_pace:
                replica.paced(stepped, seconds)
            outputs = self._failed_adds(replica) + stepped
            for out in outputs:
                replica.unprefilled.pop(out.request_id, None)
                if out.request_id in replica.held:
                    replica.held[out.request_id] = max(replica.held[out.request_id] - 1, 0)
                    replica.tokens += 1 if out.token_ids else 0
                    if out.finished:
                        del replica.held[out.request_id]
            return outputs
        loss = device_loss(replica.engine.plan, failure) if isinstance(failure, Exception) else None
        if loss is None or all(r.lost is not None or r is replica for r in self.replicas):
            raise failure
        return self._lose(replica, loss)

    def _failed_adds(self, replica: Replica) -> list[RequestOutput]:
        """The requests handed over whose add raised on the replica's thread after check_request passed (none
        should): each ends with its error rather than waiting for tokens that never come."""
        failed = []
        for request_id, adding in list(replica.adding.items()):
            if not adding.done():
                continue
            del replica.adding[request_id]
            if adding.exception() is not None:
                replica.held.pop(request_id, None)
                replica.unprefilled.pop(request_id, None)
                error = RequestError("internal_error", f"the replica on {replica.device} did not take the request: "
                                                       f"{adding.exception()}")
                failed.append(RequestOutput(request_id, [], [], "", None, True, "error", error))
        return failed

    def _lose(self, replica: Replica, loss: DeviceLoss) -> list[RequestOutput]:
        """The replica's requests failed with its device's error; the others serve on."""
        replica.lost = loss.message
        self.lost_replicas += 1
        failed = sorted(replica.held)
        replica.held.clear()
        replica.unprefilled.clear()
        replica.adding.clear()
        log.warning("replica on %s lost (%s): %d request(s) on it failed; serving on %s", replica.device,
                    "; ".join(loss.lost.values()), len(failed),
                    ", ".join(r.device for r in self.replicas if r.lost is None))
        error = RequestError("device_lost", loss.message.replace("; check the device", "; the other replicas serve "
                                                                                       "on; check the device"))
        return [RequestOutput(rid, [], [], "", None, True, "error", error) for rid in failed]

    # ---------------------------------------------------------------- the rest of the engine protocol
    def stats(self) -> dict:
        merged: dict[str, Any] = {}
        for replica in self.replicas:
            if replica.lost is None and replica.stepping is None:
                replica.last_stats = replica.call(replica.engine.stats)
            for key, value in replica.last_stats.items():
                if isinstance(value, int):
                    merged[key] = merged.get(key, 0) + value
        merged["replicas"] = [{"device": r.device, "requests_routed": r.served, "tokens_generated": r.tokens,
                               "pace": round(r.pace.factor, 3), "paced_steps": r.pace.steps,
                               "held": len(r.held), "lost": r.lost} for r in self.replicas]
        merged["replicas_lost"] = self.lost_replicas
        return merged

    def idle_work(self, interrupted: Callable[[], bool]) -> bool:
        return False

    def reconfirmation_report(self) -> dict | None:
        return None
