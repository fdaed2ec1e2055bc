"""Hostile `eval --reference` files through the real CLI, on the built-in model: a reference saved here, then its
header or its arrays rewritten (its hashes kept, so nothing but the poison tells it apart). Every one is refused in
one line naming the field or tensor, exit 2, within seconds, nothing recorded; and a figure that comes out
non-finite from valid data is not recorded either (exit 1)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from bringup.profiles.store import load_profile
from bringup.runner.eval.metrics import NllSummary, summarize_nll
from bringup.runner.eval.record import eval_record
from bringup.runner.eval.run import EvalResult, NonFiniteScores
from bringup.runner.eval.settings import EvalSettings
from tests.cli.eval_references import Tensors, poisoned
from tests.cli.run_cli import CliResult, run_cli

SAME_RUN_KLD = 1e-9  # float32 rounding of a different summation order: ~1e-13 measured
REFUSAL_SECONDS = 10.0  # a refusal comes before the model runs; a run here takes about a second


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """A reference of the built-in model's float32 run: 63 positions, k 32, vocabulary 264."""
    folder = tmp_path_factory.mktemp("hostile-eval")
    out = folder / "ref.safetensors"
    result = run_cli(["eval", "--device", "cpu", "--profile", str(folder / "p.yaml"), "--ctx", "32", "--stride", "16",
                      "--max-tokens", "64", "--save-reference", str(out)])
    assert result.code == 0, result.stderr
    return out


def evaluate(reference: Path, folder: Path) -> CliResult:
    return run_cli(["eval", "--device", "cpu", "--profile", str(folder / "p.yaml"), "--reference", str(reference)])


def refused(result: CliResult, reference: Path, phrase: str, folder: Path) -> None:
    assert result.code == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]  # the rest: INFO logs
    assert len(lines) == 1 and lines[0].startswith(f"error: --reference {reference}: "), result.stderr
    assert phrase in lines[0], lines[0]
    assert not (folder / "p.yaml").exists() or load_profile(folder / "p.yaml").eval is None


def changed(**fields: Any) -> Callable[[dict], dict]:
    return lambda header: header | fields


def nested_versions(header: dict) -> str:
    return json.dumps(header | {"versions": "@"}).replace('"@"', "[" * 100_000 + "]" * 100_000)


def long_k(header: dict) -> str:
    return json.dumps(header | {"k": "@"}).replace('"@"', "7" * 5000)


def without(field: str) -> Callable[[dict], dict]:
    return lambda header: {k: v for k, v in header.items() if k != field}


def empty_rows(arrays: Tensors) -> Tensors:
    return arrays | {"top_ids": arrays["top_ids"][:, :0].contiguous(),
                     "top_logprobs": arrays["top_logprobs"][:, :0].contiguous()}


HEADERS = {
    "tokens as a string": (changed(tokens="64"), None, "its header's tokens is '64', not an integer from 2 to"),
    "tokens as a float": (changed(tokens=64.0), None, "its header's tokens is 64.0, not an integer"),
    "vocab_size as a string": (changed(vocab_size="264"), None, "its header's vocab_size is '264', not an integer"),
    "vocab_size null": (changed(vocab_size=None), None, "its header's vocab_size is None, not an integer"),
    "ctx as a string": (changed(ctx="32"), None, "its header's ctx is '32', not an integer from 2 to"),
    "ctx as a float": (changed(ctx=32.0), None, "its header's ctx is 32.0, not an integer"),
    "text_sha256 as an integer": (changed(text_sha256=5), None, "its header's text_sha256 is 5, not a sha256"),
    "text_sha256 null": (changed(text_sha256=None), None, "its header's text_sha256 is None, not a sha256"),
    "k 0, empty rows": (changed(k=0), empty_rows, "its header's k is 0, not an integer from 1 to vocab_size (264)"),
    "k beyond the vocabulary": (changed(k=1000), None, "its header's k is 1000, not an integer from 1 to vocab_size"),
    "k of 5000 digits": (long_k, None, "its header's k is an integer of 5000 digits, not an integer"),
    "versions nested deeply": (nested_versions, None, "its header nests 100001 levels deep, more than the 4"),
    "stride not below ctx": (changed(stride=32), None, "its header's stride is 32, not an integer from 1 to ctx - 1"),
    "an unknown field": (changed(extra=1), None, "its header has fields this bringup does not know: 'extra'"),
    "a missing field": (without("tokens"), None, "its header lacks tokens"),
    "versions not strings": (changed(versions={"torch": 2}), None, "its header's versions is {'torch': 2}, not an"),
    "a model name too long": (changed(model="m" * 300), None, "its header's model is 'mmmm"),
}


def plus_five(arrays: Tensors) -> Tensors:
    return arrays | {"top_logprobs": arrays["top_logprobs"] + 5}


def nan_at(name: str, position: int) -> Callable[[Tensors], Tensors]:
    def poison(arrays: Tensors) -> Tensors:
        values = arrays[name].clone()
        values[position] = math.nan
        return arrays | {name: values}

    return poison


def ids_as(dtype: torch.dtype) -> Callable[[Tensors], Tensors]:
    return lambda arrays: arrays | {"top_ids": arrays["top_ids"].to(dtype)}


def swapped_top_two(arrays: Tensors) -> Tensors:
    values = arrays["top_logprobs"].clone()
    values[3, [0, 1]] = values[3, [1, 0]]
    return arrays | {"top_logprobs": values}


def repeated_id(arrays: Tensors) -> Tensors:
    ids = arrays["top_ids"].clone()
    ids[2, 1] = ids[2, 0]
    return arrays | {"top_ids": ids}


def outside_vocabulary(arrays: Tensors) -> Tensors:
    ids = arrays["top_ids"].clone()
    ids[4, 0] = 264
    return arrays | {"top_ids": ids}


def twice_the_mass(arrays: Tensors) -> Tensors:  # 32 tokens at 1/16 each: sorted, each at most 0, summing to 2
    return arrays | {"top_logprobs": torch.full_like(arrays["top_logprobs"], math.log(1 / 16))}


def target_above_top(arrays: Tensors) -> Tensors:
    return arrays | {"target_logprobs": (arrays["top_logprobs"][:, 0] + 0.5).clamp_max(0.0).contiguous()}


ROWS = {
    "NaN target logprobs": (nan_at("target_logprobs", 0), "target_logprobs at position 0 holds NaN or an infinity"),
    "NaN top logprobs": (nan_at("top_logprobs", 5), "top_logprobs at position 5 holds NaN or an infinity"),
    "top logprobs of +5": (plus_five, "top_logprobs at position 0 holds a log-probability above 0"),
    "bool ids": (ids_as(torch.bool), "top_ids has dtype bool, not an integer dtype"),
    "float ids": (ids_as(torch.float32), "top_ids has dtype float32, not an integer dtype"),
    "a row out of order": (swapped_top_two, "top_logprobs at position 3 is not sorted from the most likely"),
    "a token twice": (repeated_id, "top_ids at position 2 names one token twice"),
    "a token outside the vocabulary": (outside_vocabulary, "top_ids at position 4 names a token outside the "
                                                           "vocabulary of 264"),
    "probabilities summing to 2": (twice_the_mass, "top_logprobs at position 0 gives its tokens a total probability "
                                                   "above 1"),
    "a target likelier than the top": (target_above_top, "target_logprobs at position 0 is likelier than the row's "
                                                         "top token"),
    "an extra tensor": (lambda a: a | {"x": torch.zeros(1)}, "holds tensors a reference does not: 'x'"),
    "a missing tensor": (lambda a: {k: v for k, v in a.items() if k != "target_logprobs"},
                         "lacks the tensor(s) target_logprobs"),
    "a row short": (lambda a: a | {"target_logprobs": a["target_logprobs"][:-1].contiguous()},
                    "target_logprobs has shape [62], which does not match its header (63 positions"),
}


@pytest.mark.parametrize("case", list(HEADERS))
def test_a_header_field_of_the_wrong_type_or_range_is_refused_by_name(saved, tmp_path, case):
    header, tensors, phrase = HEADERS[case]
    reference = poisoned(saved, tmp_path, header, tensors)
    start = time.perf_counter()
    result = evaluate(reference, tmp_path)
    assert time.perf_counter() - start < REFUSAL_SECONDS
    refused(result, reference, phrase, tmp_path)


@pytest.mark.parametrize("case", list(ROWS))
def test_poisoned_arrays_are_refused_where_the_file_is_read(saved, tmp_path, case):
    tensors, phrase = ROWS[case]
    reference = poisoned(saved, tmp_path, tensors=tensors)
    start = time.perf_counter()
    result = evaluate(reference, tmp_path)
    assert time.perf_counter() - start < REFUSAL_SECONDS
    refused(result, reference, phrase, tmp_path)
    assert "save it again with `bringup eval --save-reference`" in result.stderr


def test_the_saved_reference_itself_passes_every_check(saved, tmp_path):
    """The two runs plan separately, each from its own start-up timings; on a busy machine they can take different
    (equally checked) weight paths, whose sums differ in float32 rounding only: KL within SAME_RUN_KLD."""
    result = evaluate(saved, tmp_path)
    assert result.code == 0, result.stderr
    entry = next(iter(load_profile(tmp_path / "p.yaml").eval.values()))
    assert entry.reference is not None and entry.reference.top1_agreement == 1.0
    assert 0.0 <= entry.reference.kld_max <= SAME_RUN_KLD, entry.reference


def test_a_figure_that_overflows_is_not_recorded(saved, tmp_path):
    """Valid arrays (every check passes) whose reference NLL is 1000 nats a token: its perplexity, e^1000, is
    beyond a float; the run ends in one line, exit 1, and the profile records no eval."""
    reference = poisoned(saved, tmp_path, tensors=lambda a: a | {"target_logprobs": torch.full_like(
        a["target_logprobs"], -1000.0)})
    result = evaluate(reference, tmp_path)
    assert result.code == 1 and "Traceback" not in result.stdout + result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "eval's reference.reference_ppl came out inf; numbers that cannot be trusted are " \
        "not recorded" in errors[0], result.stderr
    assert not (tmp_path / "p.yaml").exists() or load_profile(tmp_path / "p.yaml").eval is None


def test_no_record_is_made_of_a_nan_figure():
    result = EvalResult(model="m", dtype="float32", device="cpu", settings=EvalSettings(32, 16, None),
                        text_source="t", text_sha256="0" * 64, text_tokens=64, windows=3,
                        nll=NllSummary(63, math.nan, 0.0, math.nan), seconds=1.0)
    with pytest.raises(NonFiniteScores, match=r"^eval's ppl came out nan"):
        eval_record(result)


def test_a_perplexity_beyond_a_float_is_infinite_not_an_overflow_error():
    summary = summarize_nll(torch.full((4,), 800.0, dtype=torch.float64))
    assert summary.nll == 800.0 and summary.ppl == math.inf
