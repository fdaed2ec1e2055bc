"""Pure ASGI middleware (safe for streaming): API-key check, per-endpoint status counting, body limits."""

from __future__ import annotations

import asyncio
import json
import secrets
import time

from bringup.number_rule import INT64_MAX, NumberRefused, whole_number
from bringup.serve.errors import error_body
from bringup.serve.http.body import BodyLimits, BodyScanner, Refusal, over_declared_size
from bringup.serve.metrics import ServerMetrics

COUNTED_ENDPOINTS = ("/v1/completions", "/v1/chat/completions", "/v1/models", "/v1/plan", "/health",
                     "/metrics", "/tokenize", "/detokenize")
JSON_PATHS = ("/tokenize", "/detokenize")  # vLLM's, outside /v1


async def _send_json(send, status: int, payload: dict, headers: list[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


class APIKeyMiddleware:
    """With a key configured, every /v1 path and JSON_PATHS need `Authorization: Bearer <key>`, decided here
    once for all of them, before any body is read: a missing or wrong key, or more than one Authorization
    header (which one counts would be a guess), is a 401 and the connection is closed unread."""

    def __init__(self, app, api_key: str | None) -> None:
        self.app = app
        self.expected = f"Bearer {api_key}".encode() if api_key else None

    async def __call__(self, scope, receive, send) -> None:
        if self.expected is not None and scope["type"] == "http" and _needs_key(scope["path"]):
            why = self._refusal(scope)
            if why is not None:
                await _send_json(send, 401, error_body(401, why, code="invalid_api_key"),
                                 [(b"www-authenticate", b"Bearer"), (b"connection", b"close")])
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope) -> str | None:
        given = [value for name, value in scope.get("headers") or [] if name == b"authorization"]
        if len(given) > 1:
            return (f"{len(given)} Authorization headers: send exactly one, "
                    "'Authorization: Bearer <key>' with the server's key")
        if given and secrets.compare_digest(given[0], self.expected):
            return None
        why = "missing" if not given else "wrong"
        return f"{why} API key: send the server's key as 'Authorization: Bearer <key>'"


def _needs_key(path: str) -> bool:
    return path.startswith("/v1") or path in JSON_PATHS


class StatusCountMiddleware:
    """Counts every HTTP answer by endpoint and status code into the server metrics."""

    def __init__(self, app, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        endpoint = path if path in COUNTED_ENDPOINTS else "other"
        counted = False

        async def counting_send(message) -> None:
            nonlocal counted
            if message["type"] == "http.response.start" and not counted:
                counted = True
                self.metrics.count_http(endpoint, message["status"])
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        except Exception:
            if not counted:  # the outer error middleware turns it into a 500
                self.metrics.count_http(endpoint, 500)
            raise


class AssumeJSONMiddleware:
    """POST bodies on /v1 (and JSON_PATHS) are JSON whatever Content-Type says (curl -d sends form encoding)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and (scope["path"].startswith("/v1")
                                                                     or scope["path"] in JSON_PATHS):
            headers = [(k, v) for k, v in scope.get("headers") or [] if k != b"content-type"]
            headers.append((b"content-type", b"application/json"))
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)


class BodyLimitMiddleware:
    """Reads every request body through a BodyScanner before the app sees it (any transfer encoding).

    A refused body is answered at once with one JSON error line and `Connection: close`: the rest of it is
    never read. So is a body that has not arrived whole within `body_timeout_s` of its head (a 408). A body
    within the limits is handed to the app in one piece.
    """

    def __init__(self, app, limits: BodyLimits, body_timeout_s: float = 60.0) -> None:
        self.app = app
        self.limits = limits
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            await self.app(scope, receive, send)
            return
        declared = declared_size(dict(scope.get("headers") or []).get(b"content-length", b""))
        if declared is not None and declared > self.limits.max_bytes:
            await _refuse(send, over_declared_size(declared, self.limits))
            return
        body = await _read_body(receive, BodyScanner(self.limits), self.body_timeout_s)
        if isinstance(body, Refusal):
            await _refuse(send, body)
        elif body is not None:  # None: the client left before sending all of it
            await self.app(scope, _replay(body, receive), send)


def declared_size(header: bytes) -> int | None:
    """Content-Length by the number rule (bringup/number_rule.py): None when absent or not a number (h11 answers
    that), 2^63 - 1 for a length past it (over any limit; int() raises past 4,300 digits)."""
    try:
        return whole_number(header.decode("latin-1"), "Content-Length")
    except NumberRefused:
        return INT64_MAX if header.isdigit() else None


def _has_body(scope) -> bool:
    headers = dict(scope.get("headers") or [])
    return b"transfer-encoding" in headers or headers.get(b"content-length", b"0") not in (b"0", b"")


async def _read_body(receive, scanner: BodyScanner, timeout_s: float) -> bytes | Refusal | None:
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return Refusal(408, f"the request body did not arrive within {timeout_s:g} s (the server's "
                                f"--body-timeout); {scanner.size} bytes came; send it faster or in one piece",
                           "body_timeout")
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        refusal = scanner.feed(chunk)
        if refusal is not None:
            return refusal
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive):
    """A receive() that gives the buffered body once, then whatever the connection says (a disconnect)."""
    given = False

    async def replay():
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _refuse(send, refusal: Refusal) -> None:
    await _send_json(send, refusal.status, error_body(refusal.status, refusal.message, code=refusal.code),
                     [(b"connection", b"close")])
