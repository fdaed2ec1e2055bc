"""Pure ASGI middleware (safe for streaming): API-key check and per-endpoint status counting."""

from __future__ import annotations

import json
import secrets

from bringup.serve.errors import error_body
from bringup.serve.metrics import ServerMetrics

COUNTED_ENDPOINTS = ("/v1/completions", "/v1/chat/completions", "/v1/models", "/v1/plan", "/health",
                     "/metrics")


async def _send_json(send, status: int, payload: dict, headers: list[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


class APIKeyMiddleware:
    """With a key configured, every /v1 path needs `Authorization: Bearer <key>` (else 401)."""

    def __init__(self, app, api_key: str | None) -> None:
        self.app = app
        self.expected = f"Bearer {api_key}".encode() if api_key else None

    async def __call__(self, scope, receive, send) -> None:
        if self.expected is not None and scope["type"] == "http" and scope["path"].startswith("/v1"):
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not secrets.compare_digest(given, self.expected):
                why = "missing" if not given else "wrong"
                await _send_json(send, 401, error_body(
                    401, f"{why} API key: send the server's key as 'Authorization: Bearer <key>'",
                    code="invalid_api_key"), [(b"www-authenticate", b"Bearer")])
                return
        await self.app(scope, receive, send)


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
    """POST bodies on /v1 are JSON whatever Content-Type says (curl -d sends form encoding), and a
    declared body over max_body_bytes is refused with 413 before it is read."""

    def __init__(self, app, max_body_bytes: int = 64 * 1024 * 1024) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"].startswith("/v1"):
            headers = [(k, v) for k, v in scope.get("headers") or [] if k != b"content-type"]
            length = dict(headers).get(b"content-length", b"0")
            if length.isdigit() and int(length) > self.max_body_bytes:
                await _send_json(send, 413, error_body(
                    413, f"request body of {int(length)} bytes is over the limit of {self.max_body_bytes}",
                    code="body_too_large"))
                return
            headers.append((b"content-type", b"application/json"))
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)
