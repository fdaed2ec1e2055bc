"""Chat templates rendered on a dedicated, bounded pool of threads, each render held to TemplateLimits.

A hostile template costs its own request a 400 when it passes a limit (it stops itself: a thread cannot be
killed), and at most `workers` threads meanwhile: the default thread pool, which tokenizing and detokenizing
use, is never taken. Renders past the pool's size wait, up to `max_waiting`; more get a 429.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from bringup.runner.text.template_limits import TemplateLimits, run_with_limits
from bringup.serve.errors import APIError


class TemplatePool:
    def __init__(self, workers: int, max_waiting: int, limits: TemplateLimits) -> None:
        self.executor = ThreadPoolExecutor(workers, thread_name_prefix="chat-template")
        self.limits = limits
        self.capacity = workers + max_waiting
        self.pending = 0
        self._lock = threading.Lock()

    async def run(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """function(*args, **kwargs) on the pool, under the limits (a 429 when the pool and its queue are full)."""
        with self._lock:
            if self.pending >= self.capacity:
                raise APIError(429, f"{self.pending} chat templates are being rendered or waiting, the most this "
                                    "server holds; retry later", code="template_queue_full")
            self.pending += 1
        future = self.executor.submit(run_with_limits, self.limits, function, *args, **kwargs)
        future.add_done_callback(self._release)  # when the work ends, even if its request is gone
        return await asyncio.wrap_future(future)

    def _release(self, _: Future) -> None:
        with self._lock:
            self.pending -= 1

    def close(self) -> None:
        """Drop waiting renders; running ones end by their time budget."""
        self.executor.shutdown(wait=False, cancel_futures=True)
