"""Attention implementations and the dispatcher that falls back from one to the next (op fallback).

Every implementation takes q [kvH, B, G*Q, hd] and the sequences' K/V gathered from the paged cache
[kvH, B, L, hd] (to SDPA, kv heads are the batch and sequences the heads; attention is independent per
pair either way); grouped-query heads are folded into the query rows, so K/V are never repeated.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from bringup.backends.base import LseAttentionFn
from bringup.backends.registry import all_backends
from bringup.errors import BringupError, StrictFallbackError, exception_line
from bringup.fallbacks import FallbackRecorder
from bringup.profiles.attention_kinds import PLAIN_ATTENTION, SDPA_BACKENDS
from bringup.runner.model.attention_layer import AttendFn, matmul_softmax_attention
from bringup.runner.model.context_attention import merged_sharing


def _sdpa(backend_name: str) -> AttendFn:
    def attend(q, k, v, mask, scale, softcap=None):  # type: ignore[no-untyped-def]
        from torch.nn.attention import SDPBackend, sdpa_kernel

        if softcap is not None:  # the plan never picks SDPA for such a model; never a wrong answer if one does
            raise NotImplementedError("scaled_dot_product_attention cannot apply attention logit soft-capping")

        with sdpa_kernel(getattr(SDPBackend, backend_name)):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)

    return attend


def _sdpa_causal(backend_name: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(getattr(SDPBackend, backend_name)):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)


# every implementation that serves every step, by name (paged_decode serves decode steps only: host/paged_decode.py)
IMPLEMENTATIONS: dict[str, Callable[[], AttendFn]] = {
    **{name: (lambda member=member: _sdpa(member)) for name, member in SDPA_BACKENDS.items()},
    PLAIN_ATTENTION: lambda: matmul_softmax_attention,
}


def backend_supplied(name: str) -> AttendFn:
    """An implementation a device family's backend supplies (Backend.attention_implementations); when no
    registered backend supplies it now, one that raises, so the dispatcher falls back to the next, saying why."""
    for backend in all_backends():
        found = backend.attention_implementations().get(name)
        if found is not None:
            return found

    def missing(*_args, **_kwargs):  # type: ignore[no-untyped-def]
        raise LookupError(f"no registered backend supplies attention implementation {name!r} in this process")

    return missing


def implementation(name: str) -> AttendFn:
    return IMPLEMENTATIONS[name]() if name in IMPLEMENTATIONS else backend_supplied(name)


class AttentionUnavailableError(BringupError):
    """Every planned attention implementation failed at run time (the environment cannot run attention)."""


class AttentionDispatcher:
    """Calls the current implementation; when it raises, records an op fallback and tries the next."""

    def __init__(self, names: list[str], recorder: FallbackRecorder) -> None:
        self.names, self.recorder, self.index = list(names), recorder, 0
        self._fn = implementation(self.names[0])
        self.causal_refused: set[str] = set()  # SDPA backends whose is_causal failed here (prompts take the mask)
        self._causal_fault: tuple[str, str] | None = None  # (backend, why): recorded once its masked call runs
        # the SDPA backend whose kernel merges a cached context by log-sum-exp, and that kernel (enable_context)
        self._context: tuple[str, LseAttentionFn] | None = None
        self.context_evidence = "not offered: prompts behind a cached context take the masked path"

    def use_context(self, backend: str, attend: LseAttentionFn, evidence: str) -> None:
        """Prompts behind a cached context through `attend` (the kernel of SDPA `backend`, merged by log-sum-exp:
        context_attention.py) while `backend` serves; the caller checked it (engine/context_check.py)."""
        self._context, self.context_evidence = (backend, attend), evidence

    def with_context(self, queries: list[torch.Tensor], context_k: torch.Tensor, context_v: torch.Tensor,
                     owns: list[tuple[torch.Tensor, torch.Tensor]], scale: float) -> list[torch.Tensor] | None:
        """Prompts behind one cached context (theirs, shared) by the merge, while its backend serves; None otherwise
        (the masked path), or after the merge failed at run time (an op fallback, recorded)."""
        if self._context is None or self._context[0] != self.current or self.current in self.causal_refused:
            return None
        backend, attend = self._context
        try:
            return merged_sharing(attend, queries, context_k, context_v, owns, scale)
        except StrictFallbackError:
            raise
        except Exception as exc:
            self._context = None
            self._context_fell_back(backend, exception_line(exc))
            return None

    def refuse_context(self, backend: str, why: str) -> None:
        """The merge not used, for `why`: an op fallback to the masked path (WARNING, counted; --strict raises)."""
        self._context = None
        self._context_fell_back(backend, why)

    def _context_fell_back(self, backend: str, why: str) -> None:
        self.context_evidence = f"the masked path: {why}"
        self.recorder.record("op", "attention", wanted=f"{backend} with a cached context merged by log-sum-exp",
                             instead=f"{self.current} with a causal mask over the context and the prompt", why=why)

    @property
    def current(self) -> str:
        return self.names[self.index]

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                 scale: float, softcap: float | None = None) -> torch.Tensor:
        while True:
            try:
                out = self._fn(q, k, v, mask, scale, softcap)
            except StrictFallbackError:
                raise
            except Exception as exc:
                self._advance(exc)
                continue
            if self._causal_fault is not None:
                self._record_causal_fault()
            return out

    def causal(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor | None:
        """A prompt with nothing cached, by the current SDPA backend's own causal masking (the kernel it runs with a
        mask, skipping the blocks above the diagonal): None for any other implementation, or once is_causal failed
        on this backend (the masked call follows; where it runs, an op fallback to it is recorded)."""
        name = self.current
        backend = SDPA_BACKENDS.get(name)
        if backend is None or name in self.causal_refused:
            return None
        try:
            return _sdpa_causal(backend, q, k, v, scale)
        except StrictFallbackError:
            raise
        except Exception as exc:
            self.causal_refused.add(name)
            self._causal_fault = (name, exception_line(exc))
            return None

    def _record_causal_fault(self) -> None:
        """The masked call ran after is_causal failed: a fallback within the backend (where the backend failed
        masked too, the dispatcher's own fallback to the next one already says so)."""
        assert self._causal_fault is not None
        (name, why), self._causal_fault = self._causal_fault, None
        if name == self.current:
            self.recorder.record("op", "attention", wanted=f"{name} is_causal", instead=f"{name} with a causal mask",
                                 why=why)

    def _advance(self, exc: Exception) -> None:
        why = exception_line(exc)
        if self.index + 1 >= len(self.names):
            raise AttentionUnavailableError(
                f"every planned attention implementation failed at run time ({', '.join(self.names)}; last: {why}); "
                "re-run `bringup probe` and `bringup verify-ops` on this device to update the profile") from exc
        self.recorder.record("op", "attention", wanted=self.current, instead=self.names[self.index + 1], why=why)
        self.index += 1
        self._fn = implementation(self.current)

