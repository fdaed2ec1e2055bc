"""Prefill attention with no profile: an SDPA backend is planned only after it computed the right numbers here; a
wrong one (a kernel override 0.5 % high) or one that cannot run is named in the attention row and left out; a tune
record's timings are replayed, its float64 check is not."""

from __future__ import annotations

import torch

from bringup.profiles.attention_kinds import PLAIN_ATTENTION
from bringup.runner.engine import attention_check
from bringup.runner.model import attention
from bringup.runner.plan.attention_timings import PROMPT_TOKENS, AttentionTimings, attention_verdicts
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
    candidates = ["sdpa_flash", "sdpa_efficient"]
    timings, replayed = attention_check.measure_attention(builtin_config(), torch.float32, CPU, candidates)
    chosen, notes = attention_verdicts(timings, candidates)
    assert chosen is None and not replayed and timings.seconds == {}  # nothing wrong is timed
    assert "sdpa_flash: error" in notes[0] and "less accurate than the plain path" in notes[0]
    assert notes[1] == "sdpa_efficient cannot run here (RuntimeError: no kernel for this dtype)"


def test_a_correct_backend_is_checked_and_the_row_says_so(monkeypatch):
    monkeypatch.setattr(attention_check, "_seconds", lambda fn, args: 1.0 if fn is attention_check.
                        matmul_softmax_attention else 0.5)  # the timings as data: the candidate faster
    plain = Choice([PLAIN_ATTENTION], "no profile")
    row, timings = attention_check.with_checked_attention(plain, builtin_config(), torch.float32, CPU, set())
    assert row.value[-1] == PLAIN_ATTENTION and len(row.value) == 2
    assert "checked at start-up, used" in row.evidence and "against float64" in row.evidence
    assert "checked and timed at start-up in" in row.evidence
    assert timings.plain_s == 1.0 and timings.seconds[row.value[0]] == 0.5  # what a tune record stores
    assert attention_check.with_checked_attention(plain, builtin_config(), torch.float32, CPU,
                                                  set(attention_check.SDPA_BY_PREFERENCE)) == (plain, None)
    verified = Choice(["sdpa_flash", PLAIN_ATTENTION], "the profile verified it")
    assert attention_check.with_checked_attention(verified, builtin_config(), torch.float32, CPU,
                                                  set()) == (verified, None)


def _not_timed(fn, args):  # type: ignore[no-untyped-def]
    raise AssertionError("a replayed start timed attention")


def test_a_record_replays_the_timings_but_the_float64_check_runs_again(monkeypatch):
    monkeypatch.setattr(attention_check, "_seconds", _not_timed)
    plain = Choice([PLAIN_ATTENTION], "no profile")
    recorded = AttentionTimings(1e-7, 2e-3, {"sdpa_flash": 1e-7}, {"sdpa_flash": 1e-3})
    others = set(attention_check.SDPA_BY_PREFERENCE) - {"sdpa_flash"}
    row, timings = attention_check.with_checked_attention(plain, builtin_config(), torch.float32, CPU, others,
                                                          recorded, "m [abc]")
    assert row.value == ["sdpa_flash", PLAIN_ATTENTION] and timings.seconds == recorded.seconds
    assert "timings from tune record m [abc], the float64 check run here" in row.evidence
    assert timings.errors["sdpa_flash"] != recorded.errors["sdpa_flash"]  # computed here, not read back
    monkeypatch.setitem(attention.IMPLEMENTATIONS, "sdpa_flash", lambda: _high)  # the kernel went wrong since
    row, _ = attention_check.with_checked_attention(plain, builtin_config(), torch.float32, CPU, others, recorded,
                                                    "m [abc]")
    assert row.value == [PLAIN_ATTENTION] and "less accurate than the plain path, not used" in row.evidence


def test_a_record_timed_on_another_prompt_length_is_timed_again():
    plain = Choice([PLAIN_ATTENTION], "no profile")
    others = set(attention_check.SDPA_BY_PREFERENCE) - {"sdpa_flash"}
    older = AttentionTimings(1e-7, 2e-3, {"sdpa_flash": 1e-7}, {"sdpa_flash": 1e-3}, tokens=512)  # before 1,024
    row, timings = attention_check.with_checked_attention(plain, builtin_config(), torch.float32, CPU, others, older,
                                                          "m [abc]")
    assert timings.tokens == PROMPT_TOKENS == 1024 and timings.plain_s != older.plain_s
    assert "checked and timed at start-up" in row.evidence and f"a {PROMPT_TOKENS}-token prompt" in row.evidence


def test_a_model_whose_prompts_are_shorter_is_timed_on_its_longest_prompt():
    plain = Choice([PLAIN_ATTENTION], "no profile")
    others = set(attention_check.SDPA_BY_PREFERENCE) - {"sdpa_flash"}
    row, timings = attention_check.with_checked_attention(plain, builtin_config(), torch.float32, CPU, others,
                                                          max_model_len=256)
    assert timings.tokens == 256 and "a 256-token prompt" in row.evidence
    recorded = AttentionTimings(1e-7, 2e-3, {"sdpa_flash": 1e-7}, {"sdpa_flash": 1e-3}, tokens=256)
    row, replayed = attention_check.with_checked_attention(plain, builtin_config(), torch.float32, CPU, others,
                                                           recorded, "m [abc]", max_model_len=256)
    assert replayed.plain_s == recorded.plain_s and "from tune record m [abc]" in row.evidence
