"""What a check returns: plain data, so it can cross a process boundary."""

from typing import Any


def supported(evidence: str, **details: Any) -> dict[str, Any]:
    return {"status": "supported", "evidence": evidence, "details": details}


def unsupported(reason: str, **details: Any) -> dict[str, Any]:
    return {"status": "unsupported", "reason": reason, "details": details}


def unknown(reason: str, **details: Any) -> dict[str, Any]:
    return {"status": "unknown", "reason": reason, "details": details}


def error_text(exc: BaseException, limit: int = 300) -> str:
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first_line}"[:limit]
