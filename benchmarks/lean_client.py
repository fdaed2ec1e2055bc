"""A streamed chat request from a raw socket, for load generators that share the machine with the server.

On a 2-core machine an httpx client parsing every server-sent event costs about 1 ms of CPU per token: at
concurrency 16 that is a third of a core, taken from whichever server is being measured (and more from one whose
engine uses every core than from one that leaves a core to its front end). This client reads the response bytes
as they come and does not parse the events: a content event is found by its bytes (`"content":"` followed by at
least one character: the role event's empty content is no token), its arrival time kept; the token counts come
from the usage chunk (`stream_options.include_usage`), an error event or a non-200 status ends the request with
its message. Same `RequestResult` as serve_bench.streamed, so the reports read the same.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from urllib.parse import urlsplit

from benchmarks.serve_bench import RequestResult, stamp_token

CONTENT = re.compile(rb'"content":"[^"]')
PROMPT_TOKENS = re.compile(rb'"prompt_tokens":(\d+)')
COMPLETION_TOKENS = re.compile(rb'"completion_tokens":(\d+)')
ERROR_MESSAGE = re.compile(rb'"error":\{[^}]*?"message":"((?:[^"\\]|\\.)*)"')
MATCH_BYTES = len(b'"content":"x')
READ_BYTES = 65536


async def lean_streamed(url: str, body: dict) -> RequestResult:
    """POST `body` (a streamed request with include_usage) to `url` and time its content events: the first sets
    TTFT, the gaps between read chunks that hold the next ones are the inter-token latencies (events that arrive
    in one read share its time)."""
    parts = urlsplit(url)
    start = time.perf_counter()
    result = RequestResult(ok=False)
    try:
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    except OSError as exc:
        result.error = f"cannot connect to {parts.netloc}: {exc}"
        return result
    try:
        payload = json.dumps(body).encode()
        writer.write(f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode() + payload)
        await writer.drain()
        received = bytearray()
        last: float | None = None
        while chunk := await reader.read(READ_BYTES):
            now = time.perf_counter()
            tail = bytes(received[-(MATCH_BYTES - 1):])  # an event's bytes may straddle two reads
            received += chunk
            for found in CONTENT.finditer(tail + chunk):
                if found.end() <= len(tail):
                    continue  # found within the last read already
                last = stamp_token(result, start, last, now)
        result.e2e_s = time.perf_counter() - start
    except OSError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        return result
    finally:
        writer.close()
    return _finished(result, bytes(received))


def _finished(result: RequestResult, received: bytes) -> RequestResult:
    status = received.split(b"\r\n", 1)[0]
    if b" 200 " not in status + b" ":
        result.error = f"{status.decode(errors='replace')}: {received[-200:]!r}"
        return result
    error = ERROR_MESSAGE.search(received)
    if error is not None:
        result.error = error.group(1).decode(errors="replace")
        return result
    prompt, completion = PROMPT_TOKENS.findall(received), COMPLETION_TOKENS.findall(received)
    if not completion:
        result.error = "no usage chunk in the stream"
        return result
    result.prompt_tokens, result.output_tokens = int(prompt[-1]), int(completion[-1])
    result.ok = result.output_tokens > 0
    return result
