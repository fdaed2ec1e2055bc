"""Prefill attention with no profile: an SDPA backend is planned only after it computed the right numbers here; a
wrong one (a kernel override 0.5 % high) or one that cannot run is named in the attention row and left out."""

from __future__ import annotations

import torch

from bringup.profiles.attention_kinds import PLAIN_ATTENTION
from bringup.runner.engine import attention_check
from bringup.runner.model import attention
from bringup.runner.plan.choice import Choice
from bringup.runner.sources.builtin_model import builtin_config

CPU = torch.device("cpu")


def _high(q, k, v, mask, scale, softcap=None):  # type: ignore[no-untyped-def]
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    return out * 1.005


def _broken(*_args, **_kwargs):  # type: ignore[no-untyped-def]
    raise RuntimeError("no kernel for this dtype")


def test_a_wrong_or_failing_backend_is_not_planned(monkeypatch):
    monkeypatch.setitem(attention.IMPLEMENTATIONS, "sdpa_flash", lambda: _high)
    monkeypatch.setitem(attention.IMPLEMENTATIONS, "sdpa_efficient", lambda: _broken)
    chosen, notes = attention_check.check_attention(builtin_config(), torch.float32, CPU,
                                                    ["sdpa_flash", "sdpa_efficient"])
    assert chosen is None
    assert "sdpa_flash: error" in notes[0] and "less accurate than the plain path" in notes[0]
    assert notes[1] == "sdpa_efficient cannot run here (RuntimeError: no kernel for this dtype)"


def test_a_correct_backend_is_checked_and_the_row_says_so(monkeypatch):
    monkeypatch.setattr(attention_check, "_seconds", lambda fn, args: 1.0 if fn is attention_check.
                        matmul_softmax_attention else 0.5)  # the timings as data: the candidate faster
    plain = Choice([PLAIN_ATTENTION], "no profile")
    row = attention_check.with_checked_attention(plain, builtin_config(), torch.float32, CPU, set())
    assert row.value[-1] == PLAIN_ATTENTION and len(row.value) == 2
    assert "checked at start-up, used" in row.evidence and "against float64" in row.evidence
    assert attention_check.with_checked_attention(plain, builtin_config(), torch.float32, CPU,
                                                  set(attention_check.SDPA_BY_PREFERENCE)) is plain
    verified = Choice(["sdpa_flash", PLAIN_ATTENTION], "the profile verified it")
    assert attention_check.with_checked_attention(verified, builtin_config(), torch.float32, CPU, set()) is verified
