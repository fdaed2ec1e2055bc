"""Drive one LLMEngine from a background thread and fan its outputs out to asyncio queues.

The engine is not thread-safe, so every call into it (add, abort, step, stats) happens on the one
engine thread. HTTP handlers talk to that thread through a command queue and receive outputs on a
per-request asyncio queue. Admission (queue limit, draining, engine death) is decided here too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from bringup.log import get_logger
from bringup.runner.engine.device_loss import DeviceLoss, device_loss
from bringup.runner.sampling_params import SamplingParams
from bringup.serve.engine_thread import EngineThread
from bringup.serve.errors import APIError
from bringup.serve.metrics import ServerMetrics
from bringup.serve.protocol import Engine

log = get_logger("serve")


@dataclass
class EngineRequest:
    """One engine request (an HTTP request with n=2 and two prompts becomes four of these)."""

    request_id: str
    prompt_token_ids: list[int]
    params: SamplingParams


class EngineFailure(Exception):
    """Delivered to a request's queue when the engine loop died under it."""


@dataclass
class _Tracked:
    outputs: asyncio.Queue
    arrival: float
    last_token_time: float | None = None
    tokens_seen: int = 0


@dataclass
class _Add:
    sequences: list[EngineRequest]
    accepted: Future


@dataclass
class _Abort:
    request_ids: list[str]


@dataclass
class _State:
    stats: dict = field(default_factory=dict)
    dead_reason: str | None = None
    device_loss: DeviceLoss | None = None  # the loop died because a device it runs on stopped answering


class AsyncEngine:
    """The asyncio face of an LLMEngine; start() it inside the server's event loop."""

    def __init__(self, engine: Engine, *, max_queue: int, metrics: ServerMetrics,
                 thread: EngineThread | None = None, idle_work: bool = False) -> None:
        self.engine = engine
        self.idle_work = idle_work  # give the engine its idle work (the plan's re-confirmation) while no request runs
        self.thread = thread  # the thread that built the engine (engine_thread.py); None: one of its own
        self.max_queue = max_queue
        self.metrics = metrics
        self.in_flight = 0
        self.draining = False
        self._commands: queue.SimpleQueue = queue.SimpleQueue()
        self._tracked: dict[str, _Tracked] = {}
        self._state = _State(stats=dict(engine.stats()))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_job: Future | None = None
        self._stop = threading.Event()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.thread = self.thread or EngineThread()
        self._loop_job = self.thread.submit(self._run)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._commands.put(None)
        if self._loop_job is not None:
            concurrent.futures.wait([self._loop_job], timeout)

    @property
    def alive(self) -> bool:
        running = self._loop_job is not None and not self._loop_job.done()
        return running and self.thread is not None and self.thread.is_alive() and self._state.dead_reason is None

    @property
    def dead_reason(self) -> str | None:
        return self._state.dead_reason

    @property
    def device_loss(self) -> DeviceLoss | None:
        return self._state.device_loss

    def start_drain(self) -> None:
        """Stop admitting; requests already admitted run to completion."""
        if not self.draining:
            log.warning("shutdown requested: no new requests admitted; draining %d in flight", self.in_flight)
        self.draining = True

    def snapshot(self) -> dict:
        stats = dict(self._state.stats)
        stats.update(in_flight=self.in_flight, alive=self.alive, draining=self.draining)
        return stats

    # ------------------------------------------------------------------ admission

    def admit(self) -> None:
        """Reserve a place for one HTTP request, or raise the API error that explains why not."""
        if self.draining:
            raise APIError(503, "the server is shutting down and admits no new requests; retry elsewhere",
                           code="shutting_down")
        if not self.alive:
            reason = self.dead_reason or "the engine loop is not running"
            raise APIError(503, f"the engine is not running ({reason}); restart the server",
                           code="engine_dead")
        if self.in_flight >= self.max_queue:
            raise APIError(429, f"the server queue is full ({self.max_queue} requests in flight; see "
                                "--max-queue); retry later", code="queue_full")
        self.in_flight += 1

    def release(self) -> None:
        self.in_flight -= 1

    # ------------------------------------------------------------------ requests

    async def add(self, sequences: list[EngineRequest]) -> asyncio.Queue:
        """Hand sequences to the engine; returns the queue their outputs (or an EngineFailure) arrive on.

        Raises APIError(400) when the engine rejects one of them (nothing stays queued then).
        """
        outputs: asyncio.Queue = asyncio.Queue()
        now = time.perf_counter()
        for seq in sequences:
            self._tracked[seq.request_id] = _Tracked(outputs=outputs, arrival=now)
        accepted: Future = Future()
        self._commands.put(_Add(sequences, accepted))
        try:
            await self._accepted(accepted)
        except ValueError as exc:
            self._forget([s.request_id for s in sequences])
            raise APIError(400, str(exc), code="invalid_value") from None
        except BaseException:
            self.abort([s.request_id for s in sequences])
            raise
        return outputs

    async def _accepted(self, accepted: Future) -> None:
        """Wait for the engine thread to take the sequences, noticing if it died meanwhile."""
        wrapped = asyncio.wrap_future(accepted)
        while True:
            done, _ = await asyncio.wait({wrapped}, timeout=1.0)
            if done:
                wrapped.result()
                return
            if not self.alive:
                raise EngineFailure(self.dead_reason or "the engine loop stopped")

    def abort(self, request_ids: list[str]) -> None:
        """Stop generating for these ids and free their KV blocks (unknown or finished ids: no-op)."""
        live = [rid for rid in request_ids if rid in self._tracked]
        self._forget(live)
        if live:
            self.metrics.count_aborted(len(live))
            self._commands.put(_Abort(live))

    def cut_all(self, message: str) -> list[str]:
        """Abort every sequence still running; each request gets APIError(503, message): the drain timeout."""
        ids = sorted(self._tracked)
        queues = {id(t.outputs): t.outputs for t in self._tracked.values()}
        self.abort(ids)
        self.metrics.count_error("drain_timeout", len(ids))
        failure = APIError(503, message, code="drain_timeout")
        for outputs in queues.values():
            outputs.put_nowait(failure)
        return ids

    def _forget(self, request_ids: list[str]) -> None:
        for rid in request_ids:
            self._tracked.pop(rid, None)

    # ------------------------------------------------------------------ engine thread

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                busy = self.engine.has_unfinished()
                if not self._apply_commands(block=not busy):
                    break
                if self.idle_work and not self.engine.has_unfinished() and self.engine.idle_work(self._wanted):
                    self._state.stats = dict(self.engine.stats())
                if self.engine.has_unfinished():
                    outputs = self.engine.step()
                    stamp = time.perf_counter()
                    self._state.stats = dict(self.engine.stats())
                    if outputs:
                        self._call_in_loop(self._deliver, outputs, stamp)
                    else:
                        time.sleep(0.001)  # nothing could be scheduled this step: don't spin
        except BaseException as exc:  # the loop must never die silently
            loss = device_loss(getattr(self.engine, "plan", None), exc) if isinstance(exc, Exception) else None
            if loss is None:
                log.exception("engine loop failed")
            else:
                log.warning("engine loop stopped: %s lost; failing the requests in flight, then stopping",
                            ", ".join(loss.lost))  # the lost device is the news, not the traceback under it
            self._state.device_loss = loss
            self._state.dead_reason = f"{type(exc).__name__}: {exc}" if loss is None else loss.message
            self._call_in_loop(self._fail_all, self._state.dead_reason)
            self._reject_pending(exc)

    def _wanted(self) -> bool:
        """Whether a command waits (or the server stops): idle work gives way to it."""
        return self._stop.is_set() or not self._commands.empty()

    def _apply_commands(self, block: bool) -> bool:
        """Run queued add/abort commands; blocks for the first one when the engine is idle."""
        try:
            command = self._commands.get(timeout=0.5) if block else self._commands.get_nowait()
        except queue.Empty:
            return True
        changed = False
        while True:
            if command is None:
                return False
            changed = True
            self._apply(command)
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                break
        if changed:
            self._state.stats = dict(self.engine.stats())
        return True

    def _apply(self, command: _Add | _Abort) -> None:
        if isinstance(command, _Abort):
            for rid in command.request_ids:
                self.engine.abort_request(rid)
            return
        if command.accepted.cancelled():
            return
        added: list[str] = []
        try:
            for seq in command.sequences:
                self.engine.add_request(seq.request_id, seq.prompt_token_ids, seq.params)
                added.append(seq.request_id)
        except Exception as exc:  # ValueError: bad input (400); anything else: reported as a 500
            for rid in added:
                self.engine.abort_request(rid)
            command.accepted.set_exception(exc)
            return
        command.accepted.set_result(None)

    def _reject_pending(self, exc: BaseException) -> None:
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            if isinstance(command, _Add) and not command.accepted.done():
                command.accepted.set_exception(EngineFailure(str(exc)))

    def _call_in_loop(self, fn, *args) -> None:
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed between the check and the call
                self._loop.call_soon_threadsafe(fn, *args)

    # ------------------------------------------------------------------ event-loop side

    def _deliver(self, outputs: list, stamp: float) -> None:
        for out in outputs:
            tracked = self._tracked.get(out.request_id)
            if tracked is None:
                continue  # aborted by its client; the engine may still report it once
            new_tokens = len(out.token_ids) - tracked.tokens_seen
            if new_tokens > 0:
                if tracked.last_token_time is None:
                    self.metrics.observe_ttft(stamp - tracked.arrival)
                    self.metrics.count_prefilled(len(out.prompt_token_ids))
                    self.metrics.count_generated(new_tokens, None)
                else:
                    self.metrics.count_generated(new_tokens, stamp - tracked.last_token_time)
                tracked.last_token_time = stamp
                tracked.tokens_seen = len(out.token_ids)
            elif out.prompt_logprobs is not None and tracked.last_token_time is None:
                self.metrics.count_prefilled(len(out.prompt_token_ids))  # a scoring request: its prompt ran
            if out.finished:
                self.metrics.count_finished(out.finish_reason or "abort", stamp - tracked.arrival,
                                            len(out.prompt_token_ids), len(out.token_ids))
                if out.finish_reason == "error":
                    self.metrics.count_error(out.error.code if out.error is not None else "engine_error")
                del self._tracked[out.request_id]
            tracked.outputs.put_nowait(out)

    def _fail_all(self, reason: str) -> None:
        failure = EngineFailure(f"the engine loop failed: {reason}")
        queues = {id(t.outputs): t.outputs for t in self._tracked.values()}
        self._tracked.clear()
        for q in queues.values():
            q.put_nowait(failure)
