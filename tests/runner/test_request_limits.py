"""SamplingParams' two levels: what the engine can run, and the narrower limits a request (server or CLI) may ask."""

from __future__ import annotations

import pytest

from bringup.runner.sampling_params import SamplingParams, token_budget


@pytest.mark.parametrize("values, field", [
    ({"temperature": 1e-30}, "temperature"),
    ({"temperature": 5.0}, "temperature"),
    ({"top_p": 1e-300}, "top_p"),
    ({"repetition_penalty": 50.0}, "repetition_penalty"),
    ({"max_tokens": 2_000_000}, "max_tokens"),
    ({"stop": ["x"] * 17}, "stop"),
])
def test_the_engine_runs_what_a_request_may_not_ask_for(values, field):
    params = SamplingParams(**values)
    params.validate()
    with pytest.raises(ValueError, match=f"^{field}: "):
        params.validate_request()


@pytest.mark.parametrize("values, field", [
    ({"temperature": float("nan")}, "temperature"),
    ({"temperature": "hot"}, "temperature"),
    ({"top_p": True}, "top_p"),
    ({"max_tokens": 2.5}, "max_tokens"),
    ({"top_k": -1}, "top_k"),
    ({"stop_token_ids": [-3]}, "stop_token_ids"),
])
def test_wrong_types_and_nan_are_refused_at_both_levels(values, field):
    params = SamplingParams(**values)
    for check in (params.validate, params.validate_request):
        with pytest.raises(ValueError, match=f"^{field}: "):
            check()


def test_the_request_limits_accept_the_usual_values():
    SamplingParams(max_tokens=64, temperature=0.0).validate_request()
    SamplingParams(temperature=0.7, top_p=0.9, top_k=50, repetition_penalty=1.1, seed=3).validate_request()


def test_token_budget_fits_the_context_as_the_server_grants_it():
    assert token_budget(10, 256, None) == 246
    assert token_budget(10, 256, 246) == 246
    with pytest.raises(ValueError, match=r"^max_tokens: .* at most 246"):
        token_budget(10, 256, 247)
    with pytest.raises(ValueError, match=r"^prompt: 256 tokens leave no room"):
        token_budget(256, 256, None)
