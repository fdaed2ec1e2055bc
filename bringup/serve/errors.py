"""Errors in the OpenAI shape: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from bringup.log import get_logger
from bringup.serve.requests.rules import json_type
from bringup.terminal_text import shown

log = get_logger("serve")

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "service_unavailable",
}


class APIError(Exception):
    """An error the API reports to the client (never a traceback)."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, param=self.param, code=self.code)


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None) -> dict:
    kind = _TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(status: int, message: str, *, param: str | None = None, code: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, param=param, code=code), status_code=status,
                        headers=headers)


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    """The most specific validation problem as one readable line, plus the offending field's path."""
    errors = list(exc.errors())
    if not errors:
        return "invalid request body", None
    for err in errors:
        if err.get("type") == "json_invalid":
            where = next((f" at offset {p}" for p in err.get("loc", ())[1:] if isinstance(p, int)), "")
            return f"request body is not valid JSON: {err.get('ctx', {}).get('error', err.get('msg'))}{where}", None
    # for a union (prompt: str | list[int] | ...) the deepest location names the real culprit
    first = max(errors, key=lambda e: len(_field_path(e)))
    path = _field_path(first)
    param = ".".join(path) or None
    msg = _union_type_message([e for e in errors if _field_path(e) == path]) or \
        str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    if first.get("type") == "missing" and param is None:
        return "request body is missing; send a JSON object", None
    if first.get("type") == "model_attributes_type" and param is None:
        return "request body must be a JSON object", None
    if first.get("type") == "extra_forbidden":
        msg = "unknown field (this server rejects fields it does not implement)"
    if param is None:  # a cross-field rule: its message starts with the field's name
        head = msg.split(" ", 1)[0]
        param = head if head in _request_fields() else None
    where = f"{param}: " if param and not msg.startswith(param) else ""
    return f"{where}{msg}", param


_KINDS = {"string_type": "a string", "list_type": "a list", "int_type": "an integer", "float_type": "a number",
          "bool_type": "true or false", "dict_type": "an object", "model_type": "an object"}


def _union_type_message(errors: list[dict]) -> str | None:
    """For a value that matched none of a union's types: every type it could have been, and what it was."""
    kinds = [_KINDS.get(e.get("type", "")) for e in errors]
    if len(errors) < 2 or None in kinds:
        return None
    return f"must be {' or '.join(dict.fromkeys(kinds))}; got {json_type(errors[0].get('input'))}"


def _field_path(error: dict) -> list[str]:
    """The error's location without 'body' and without union member tags like 'list[int]'."""
    out = []
    for part in error.get("loc", ()):
        text = str(part)
        if text == "body" and not out:
            continue
        if isinstance(part, str) and ("[" in text or text in _TYPE_TAGS):
            continue
        out.append(text)
    return out


_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none", "function-after", "function-before",
              "TextPart", "constrained-str", "constrained-int", "constrained-float"}


def _request_fields() -> set[str]:
    from bringup.serve.requests.schemas import ChatCompletionRequest, CompletionRequest

    return set(CompletionRequest.model_fields) | set(ChatCompletionRequest.model_fields)


def install_error_handlers(app: FastAPI) -> None:
    """Map every failure to an OpenAI-shaped JSON error; unknown exceptions become a logged 500."""

    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(exc)
        return error_response(400, message, param=param, code="invalid_value")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = str(exc.detail) if exc.detail else "error"
        if exc.status_code == 400 and isinstance(exc.__cause__, ValueError | RecursionError):
            # the framework's "error parsing the body": bytes that are not UTF-8, or nesting too deep
            message = f"request body is not valid JSON: {exc.__cause__}; send a UTF-8 JSON object"
        return error_response(exc.status_code, message, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error serving %s %s", request.method, shown(request.url.path))
        return error_response(500, f"internal server error: {type(exc).__name__}: {exc}")
