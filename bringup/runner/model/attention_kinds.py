"""The attention implementations by name, for the runner and the probes that import them from here: the names are
spelled once, in profiles/attention_kinds.py (below every layer that reads them: the verdict's hot path in profiles
needs them too)."""

from __future__ import annotations

from bringup.profiles.attention_kinds import (
    FUSED_SDPA,
    PAGED_DECODE,
    PLAIN_ATTENTION,
    SDPA,
    SDPA_ALIASES,
    SDPA_BACKENDS,
    SDPA_BY_PREFERENCE,
    SDPA_MATH,
    SdpaBackend,
)

__all__ = ["FUSED_SDPA", "PAGED_DECODE", "PLAIN_ATTENTION", "SDPA", "SDPA_ALIASES", "SDPA_BACKENDS",
           "SDPA_BY_PREFERENCE", "SDPA_MATH", "SdpaBackend"]
