"""Request fields the server accepts and ignores: each name logged once at WARNING, every use counted.

Clients written for other OpenAI-compatible servers send fields of their own (vLLM does the same: it accepts
and ignores them). A field that would change the answer if it were honoured is not ignored: the schemas
declare those and refuse any value but the neutral one (see schemas.py).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from pydantic import BaseModel

from bringup.log import get_logger

log = get_logger("serve")

MAX_NAMES = 256  # distinct names remembered; a client inventing names cannot grow the table or flood the log
NAME_CHARS = 80  # a name longer than this is cut in the log and the table
OTHER = "<other>"  # the bucket for names past MAX_NAMES


class IgnoredFields:
    """The ignored field names one server has seen (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def note(self, body: BaseModel) -> list[str]:
        """Record every ignored field of a validated request (nested ones as `messages.mood`); the names."""
        names = list(dict.fromkeys(_extra_names(body, "")))
        for name in names:
            self._count(name[:NAME_CHARS])
        return names

    def snapshot(self) -> dict[str, int]:
        """name -> how many requests sent it (a copy, safe to read from any thread)."""
        with self._lock:
            return dict(self.counts)

    def _count(self, name: str) -> None:
        with self._lock:
            if name not in self.counts and len(self.counts) >= MAX_NAMES:
                first_overflow = OTHER not in self.counts
                self.counts[OTHER] += 1
                if first_overflow:
                    log.warning("more than %d distinct unknown request field names; ignoring the rest without "
                                "naming them", MAX_NAMES)
                return
            first = name not in self.counts
            self.counts[name] += 1
        if first:
            # %r: 'name' in quotes, and a name holding a newline cannot forge a log line
            log.warning("ignoring request field %r (not part of the OpenAI API this server implements)", name)


def _extra_names(model: BaseModel, prefix: str) -> list[str]:
    """The names of the fields pydantic kept aside as extra, in this model and every model inside it."""
    names = [prefix + str(key) for key in (model.model_extra or {})]
    for field in type(model).model_fields:
        names.extend(_nested(getattr(model, field), f"{prefix}{field}."))
    return names


def _nested(value: Any, prefix: str) -> list[str]:
    if isinstance(value, BaseModel):
        return _extra_names(value, prefix)
    if isinstance(value, list) and value and isinstance(value[0], BaseModel | list):
        return [name for item in value for name in _nested(item, prefix)]
    return []
