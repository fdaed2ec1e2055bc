"""The server's own settings (not the engine's), light to import: `bringup serve --help` shows their defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bringup.serve.http.body import MIB


@dataclass
class ServerConfig:
    """Server settings that are not the engine's."""

    served_model_name: str | None = None  # None: the engine's model_name
    api_key: str | None = None
    max_queue: int = 64
    drain_timeout_s: float = 60.0
    stream_write_timeout_s: float = 30.0  # a stream whose client reads nothing for this long is cut
    max_body_bytes: int = 64 * MIB
    header_timeout_s: float = 10.0  # a request's head must arrive whole within this
    body_timeout_s: float = 60.0  # and its body within this after the head
    max_connections: int = 1000  # open connections (lowered to what ulimit -n allows)
    template_timeout_s: float = 10.0  # one chat-template rendering's time budget
    template_workers: int = 2  # threads that render chat templates (their own pool; rendering holds the GIL,
    # so more threads add no throughput)
    profile_path: Path | None = None
    reconfirm_at_idle: bool = False  # re-time a plan from a contended start while idle (bringup serve turns it on)
    extra_model_names: list[str] = field(default_factory=list)
