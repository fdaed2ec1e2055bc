"""Tokenizing, detokenizing and building token-string answers: on one dedicated thread, off the event loop.

A million-character prompt costs a few hundred MB while it is encoded and answered; doing such work one request at
a time bounds the server's memory by one of them, whatever the number of clients, and never takes the default
thread pool or the event loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class TextWork:
    def __init__(self) -> None:
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="text-work")

    async def run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(function, *args, **kwargs))

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
