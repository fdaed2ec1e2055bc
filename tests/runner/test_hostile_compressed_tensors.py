"""Hostile compressed-tensors configs through the real CLI: `ignore` patterns whose matching time has no bound,
group sizes that are not integers or are missing, a `weight_shape` narrower than the weight; each refused in one
line naming the entry, field or tensor, within seconds, never a traceback."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from bringup.errors import BringupError
from bringup.runner.weights.formats.compressed_tensors import ignore_patterns
from bringup.runner.weights.formats.compressed_tensors.ignore_patterns import (
    MAX_PATTERNS,
    MAX_TOTAL_WAYS,
    MAX_WAYS,
    read_ignore,
)
from tests.cli.run_cli import CliResult
from tests.runner.compressed_tensors_files import (
    edit_config,
    generate,
    quantization,
    write_compressed,
    write_dequantized,
)
from tests.runner.hf_fixtures import make_hf_model

REFUSAL_SECONDS = 10.0  # a refusal takes milliseconds; the ReDoS it prevents took 1.2 s with nine `.*`, x5 per more
HAS_RE2 = ignore_patterns.linear_time_engine() is not None


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tiny-llama-hostile-ct") / "m"
    make_hf_model(path, hidden=64, intermediate=128, layers=2, vocab=320)
    return path


@pytest.fixture
def backtracking_only(monkeypatch):
    """Python's `re` alone, as where google-re2 is not installed."""
    monkeypatch.setattr(ignore_patterns, "linear_time_engine", lambda: None)


def with_ignore(tiny: Path, folder: Path, ignore: list[str]) -> Path:
    model = folder / "q"
    write_dequantized(tiny, model, "int-quantized")  # float weights: the config alone decides
    edit_config(model, {"quantization_config": quantization("compressed-tensors") | {"ignore": ignore}})
    return model


def refused_in_one_line(result: CliResult, model: Path, *phrases: str) -> str:
    assert result.code == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"error: {model}: "), result.stderr
    for phrase in phrases:
        assert phrase in result.stderr, result.stderr
    return result.stderr


TOO_SLOW = "may take too long to match: its repeats and alternatives give over 16,384 ways"
NESTED = "repeats a group that itself repeats or alternates"
BACKTRACKING = {
    "twelve .*": ("re:" + ".*" * 12 + "!", TOO_SLOW),
    "a class repeated ten times": ("re:" + "[a-z_.0-9]*" * 10, TOO_SLOW),
    "thirty optional a": ("re:" + "a?" * 30 + "a" * 30, TOO_SLOW),
    "alternatives in a row": ("re:" + "(?:a|ab)" * 20 + "$", TOO_SLOW),
    "a repeated repeat": ("re:(a+)+$", NESTED),
    "a repeated alternation": ("re:(ab|a)*z", NESTED),
}
ANY_ENGINE = {
    "a backreference": (r"re:(model)\1", "uses a backreference, which bringup does not match"),
    "a lookahead": ("re:(?=model).*x", "uses a lookahead or lookbehind"),
    "300 characters": ("re:" + "x" * 300, "is 300 characters long, more than the 256 a pattern may be"),
    "not a pattern": ("re:[a-", "is not a regular expression (unterminated character set"),
}


@pytest.mark.parametrize("case", list(BACKTRACKING) + list(ANY_ENGINE))
def test_a_pattern_without_a_bound_on_its_matching_time_is_refused_in_seconds(tiny, tmp_path, backtracking_only,
                                                                               case):
    pattern, rule = (BACKTRACKING | ANY_ENGINE)[case]
    model = with_ignore(tiny, tmp_path, ["lm_head", pattern])
    start = time.perf_counter()
    result = generate(model, tmp_path)
    assert time.perf_counter() - start < REFUSAL_SECONDS
    shown = repr(pattern)[:57] if len(repr(pattern)) > 60 else repr(pattern)
    message = refused_in_one_line(result, model, f"quantization_config ignore entry {shown}", rule,
                                  "fix config.json: list the module names, or use a simpler pattern")
    assert ("pip install 'bringup[re2]'" in message) == (case in BACKTRACKING)


@pytest.mark.skipif(not HAS_RE2, reason="google-re2 is not installed: every pattern is matched by Python's re")
def test_with_re2_the_same_patterns_are_matched_in_linear_time(tiny, tmp_path):
    patterns = [pattern + "!" for pattern, _ in BACKTRACKING.values()]  # no module name has a "!"
    model = write_compressed(tiny, tmp_path / "int8", "int-quantized")
    edit_config(model, {"quantization_config": quantization("compressed-tensors") | {"ignore": patterns}})
    start = time.perf_counter()
    result = generate(model, tmp_path)  # every weight is the int8 one stored
    assert result.code == 0, result.stderr
    assert time.perf_counter() - start < 60  # a load and three tokens; the matches themselves take microseconds


@pytest.mark.parametrize("case", list(ANY_ENGINE))
def test_what_re2_does_not_read_is_refused_with_or_without_it(tiny, tmp_path, case):
    pattern, rule = ANY_ENGINE[case]
    model = with_ignore(tiny, tmp_path, [pattern])
    refused_in_one_line(generate(model, tmp_path), model, rule)


def test_a_pattern_is_shown_escaped_and_cut(tiny, tmp_path):
    model = with_ignore(tiny, tmp_path, ["re:\x1b]0;owned\x07(a)\\1" + "b" * 80])
    message = refused_in_one_line(generate(model, tmp_path), model, "uses a backreference", r"\x1b]0;owned\x07")
    assert "\x1b" not in message and "\x07" not in message and "b" * 60 not in message


def test_too_many_patterns_or_too_many_ways_together_are_refused(tiny, tmp_path, backtracking_only):
    many = with_ignore(tiny, tmp_path / "many", [f"re:layer{i}" for i in range(MAX_PATTERNS + 1)])
    refused_in_one_line(generate(many, tmp_path), many, f"has {MAX_PATTERNS + 1} `re:` patterns, more than the "
                        f"{MAX_PATTERNS} bringup matches")
    costly = [f"re:.*[ab]?.*x{i}" for i in range(8)]  # 65 * 2 * 65 ways each, 67,600 together
    together = with_ignore(tiny, tmp_path / "together", costly)
    refused_in_one_line(generate(together, tmp_path), together, "8 `re:` patterns give 67,600 ways",
                        f"more than the {MAX_TOTAL_WAYS:,}")


ENGINES = ["re", pytest.param("re2", marks=pytest.mark.skipif(not HAS_RE2, reason="google-re2 is not installed"))]


@pytest.mark.parametrize("engine", ENGINES)
def test_usual_patterns_match_as_compressed_tensors_reads_them(monkeypatch, engine):
    if engine == "re":
        monkeypatch.setattr(ignore_patterns, "linear_time_engine", lambda: None)
    rules = read_ignore(["lm_head", "re:.*mlp.gate$", r"re:model\.layers\.[0-3]\..*self_attn\.(q|k)_proj",
                         "re:visual.*", "re:.*vision_tower.*", "re:(?i)ROUTER$"], Path("m"))
    ignored = ["lm_head", "model.layers.7.mlp.gate", "model.layers.2.self_attn.k_proj", "visual.blocks.0.qkv",
               "model.vision_tower.x", "ROUTER", "router"]
    kept = ["model.lm_head", "model.layers.7.mlp.gate_proj", "model.layers.4.self_attn.k_proj",
            "model.layers.2.self_attn.v_proj", "model.visual.x", "model.layers.0.router.x"]
    assert [rules.ignores(m) for m in ignored] == [True] * len(ignored)
    assert [rules.ignores(m) for m in kept] == [False] * len(kept)


def test_the_costliest_patterns_accepted_match_a_large_model_in_seconds(backtracking_only):
    """At the bounds (each pattern MAX_WAYS ways, all of them MAX_TOTAL_WAYS) against 1,000 names of 64
    characters, the most a name is counted with: the worst Python's `re` can be made to do here."""
    worst = [f"re:{'(?:..?)' * 14}z{i}" for i in range(MAX_TOTAL_WAYS // MAX_WAYS)]  # 2**14 ways each
    rules = read_ignore(worst, Path("m"))
    names = [f"model.layers.{i}.mlp.experts.{i}.down_proj".ljust(64, "x") for i in range(1000)]
    start = time.perf_counter()
    assert not any(rules.ignores(name) for name in names)
    assert time.perf_counter() - start < 20  # measured: 0.7 s


def test_a_pattern_refused_names_the_model_directory(tmp_path, backtracking_only):
    with pytest.raises(BringupError, match=r"^m: quantization_config ignore entry 're:\.\*\.\*\.\*'"):
        read_ignore(["re:.*.*.*"], Path("m"))


GROUP_SIZES = {"32.0": (32.0, "group_size=32.0, not an integer"), "true": (True, "group_size=True, not an integer"),
               "'32'": ("32", "group_size='32', not an integer"),
               "null": (None, "group_size=None: a group strategy needs its size")}


@pytest.mark.parametrize("case", list(GROUP_SIZES))
def test_a_group_size_that_is_not_an_integer_or_is_missing_is_refused(tiny, tmp_path, case):
    size, phrase = GROUP_SIZES[case]
    model = tmp_path / "q"
    write_dequantized(tiny, model, "int-quantized")
    edit_config(model, {"quantization_config": quantization("compressed-tensors", num_bits=4, strategy="group",
                                                            group_size=size) | {"format": "pack-quantized"}})
    refused_in_one_line(generate(model, tmp_path), model, "int4 weights with strategy=group, " + phrase,
                        "(bringup reads a scale per channel or per group of 32, 64, 128, 256 inputs)")


def test_a_weight_shape_narrower_than_its_packed_weight_is_refused_before_any_is_read(tiny, tmp_path):
    checkpoint = write_compressed(tiny, tmp_path / "int4", "pack-quantized", group=32)
    weights = checkpoint / "model.safetensors"
    tensors = load_file(str(weights))
    name = "model.layers.1.self_attn.q_proj.weight_shape"
    assert tensors[name].tolist() == [64, 64]
    tensors[name] = torch.tensor([64, 57], dtype=torch.int32)  # 57 columns still fill the 8 packed words
    save_file(tensors, str(weights), metadata={"format": "pt"})
    result = generate(checkpoint, tmp_path)
    assert result.code == 2 and "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"error: {weights}: tensor '{name}' holds [64, 57] but config.json implies "
                                    "[64, 64] for that weight"), result.stderr
