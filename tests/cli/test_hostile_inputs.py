"""Hostile input and broken models through the real CLI: every one a clear answer, none a crash, a hang or a guess.

The corpus is data: each case names a builder that makes the broken model directory, profile or command line
under the test's tmp_path and returns the argv, and the fragments the one-line error must hold (exit code 2).
Broken models start from one small random-initialised model built once per module and copied per case.
"""

from __future__ import annotations

import json
import resource
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from bringup.errors import BringupError
from bringup.profiles.store import load_profile
from tests.cli.run_cli import CliResult, run_cli
from tests.runner.hf_fixtures import make_hf_model

WEIGHTS = "model.safetensors"
DOWN = "model.layers.0.mlp.down_proj.weight"
VOCAB = 320  # make_hf_model's default
Builder = Callable[[Path, Path], list[str]]  # (tmp_path, the good model directory) -> argv


@dataclass(frozen=True)
class Case:
    name: str
    build: Builder
    fragments: tuple[str, ...]


@pytest.fixture(scope="module")
def good_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "good"
    make_hf_model(path, hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64)
    return path


def assert_one_line_error(result: CliResult, *fragments: str) -> None:
    assert result.code == 2, (result.code, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


# ---------------------------------------------------------------- building blocks


def copied(tmp_path: Path, good: Path) -> Path:
    return Path(shutil.copytree(good, tmp_path / "model"))


def generate(model: Path, tmp_path: Path, *extra: str) -> list[str]:
    return ["generate", "Hi", "--model", str(model), "--device", "cpu", "--profile", str(tmp_path / "none.yaml"),
            *extra]


def serve(model: Path, tmp_path: Path, *extra: str) -> list[str]:
    return ["serve", "--model", str(model), "--device", "cpu", "--profile", str(tmp_path / "none.yaml"),
            "--port", "0", *extra]


def builtin(tmp_path: Path, *extra: str) -> list[str]:
    return ["generate", "Hi", "--device", "cpu", "--profile", str(tmp_path / "none.yaml"), *extra]


def edit_json(model: Path, file: str, change: Callable[[dict], object]) -> None:
    path = model / file
    data = json.loads(path.read_text())
    result = change(data)
    path.write_text(json.dumps(data if result is None else result))


def set_config(**values: object) -> Builder:
    def build(tmp_path: Path, good: Path) -> list[str]:
        model = copied(tmp_path, good)
        edit_json(model, "config.json", lambda cfg: cfg.update(values))
        return generate(model, tmp_path)

    return build


def replace_json(file: str, document: object) -> Builder:
    def build(tmp_path: Path, good: Path) -> list[str]:
        model = copied(tmp_path, good)
        (model / file).write_text(json.dumps(document))
        return generate(model, tmp_path)

    return build


def set_generation(**values: object) -> Builder:
    def build(tmp_path: Path, good: Path) -> list[str]:
        model = copied(tmp_path, good)
        edit_json(model, "generation_config.json", lambda gen: gen.update(values))
        return generate(model, tmp_path)

    return build


def raw_weights(change: Callable[[bytes], bytes], command: Callable = generate) -> Builder:
    """Rewrite the bytes of the weights file."""
    def build(tmp_path: Path, good: Path) -> list[str]:
        model = copied(tmp_path, good)
        path = model / WEIGHTS
        path.write_bytes(change(path.read_bytes()))
        return command(model, tmp_path)

    return build


def header_edit(change: Callable[[dict], None]) -> Builder:
    """Rewrite the safetensors header (as JSON) and keep the data as it was."""
    def rewrite(raw: bytes) -> bytes:
        length = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + length])
        change(header)
        text = json.dumps(header).encode()
        return struct.pack("<Q", len(text)) + text + raw[8 + length:]

    return raw_weights(rewrite)


def tensors_edit(change: Callable[[dict[str, torch.Tensor]], None], command: Callable = generate,
                 *extra: str) -> Builder:
    """Rewrite the weights as tensors (safetensors writes a valid file)."""
    def build(tmp_path: Path, good: Path) -> list[str]:
        model = copied(tmp_path, good)
        tensors = load_file(model / WEIGHTS)
        change(tensors)
        save_file(tensors, model / WEIGHTS)
        return command(model, tmp_path, *extra)

    return build


def header_length(value: int) -> Callable[[bytes], bytes]:
    return lambda raw: struct.pack("<Q", value) + raw[8:]


def garbled_header(raw: bytes) -> bytes:
    length = struct.unpack("<Q", raw[:8])[0]
    return raw[:8] + b"{not json".ljust(length) + raw[8 + length:]


def shifted_first_tensor(header: dict) -> None:
    first = min((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0])
    header[first]["data_offsets"] = [o + 4 for o in header[first]["data_offsets"]]


def nan_in(name: str) -> Callable[[dict[str, torch.Tensor]], None]:
    def change(tensors: dict[str, torch.Tensor]) -> None:
        tensors[name] = tensors[name].clone()
        tensors[name][0, 0] = float("nan")

    return change


def nan_row(name: str, row: int) -> Callable[[dict[str, torch.Tensor]], None]:
    def change(tensors: dict[str, torch.Tensor]) -> None:
        tensors[name] = tensors[name].clone()
        tensors[name][row] = float("nan")

    return change


def cast(name: str, dtype: torch.dtype) -> Callable[[dict[str, torch.Tensor]], None]:
    def change(tensors: dict[str, torch.Tensor]) -> None:
        tensors[name] = tensors[name].to(dtype)

    return change


def drop(name: str) -> Callable[[dict[str, torch.Tensor]], None]:
    def change(tensors: dict[str, torch.Tensor]) -> None:
        del tensors[name]

    return change


def add(name: str) -> Callable[[dict[str, torch.Tensor]], None]:
    def change(tensors: dict[str, torch.Tensor]) -> None:
        tensors[name] = torch.zeros(2, 2)

    return change


def duplicated_shard(tmp_path: Path, good: Path) -> list[str]:
    model = copied(tmp_path, good)
    shutil.copy(model / WEIGHTS, model / "model-extra.safetensors")
    return generate(model, tmp_path)


def argv(*args: str) -> Builder:
    """A command line; `{tmp}` in an argument is the test's tmp_path."""
    return lambda tmp_path, _good: [a.replace("{tmp}", str(tmp_path)) for a in args]


def flags(*extra: str) -> Builder:
    return lambda tmp_path, _good: builtin(tmp_path, *extra)


ALIAS_BOMB = "schema: bringup.profile/v1\ndevice:\n  id: cpu\n  backend: cpu\n  name: x\n  extra:\n" + \
    "    l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + \
    "".join(f"    l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 10))
ANCHOR_ONLY = "schema: bringup.profile/v1\ndevice: &d {id: cpu, backend: cpu, name: x}\n"


def profile_text(text: str, *args: str) -> Builder:
    """Write the profile to {tmp}/p.yaml, then run args (with {p} for its path)."""
    def build(tmp_path: Path, _good: Path) -> list[str]:
        path = tmp_path / "p.yaml"
        path.write_text(text)
        return [a.replace("{p}", str(path)).replace("{tmp}", str(tmp_path)) for a in args]

    return build


# ---------------------------------------------------------------- the corpus

MODEL_FILES = [
    Case("header claims 2^60 bytes", raw_weights(header_length(2**60)), ("header claims", "re-download")),
    Case("header claims 2^60 bytes (serve)", raw_weights(header_length(2**60), serve), ("header claims",)),
    Case("header claims more than the file", raw_weights(header_length(10**6)), ("header claims", "follow")),
    Case("header is not JSON", raw_weights(garbled_header), ("not valid JSON", WEIGHTS)),
    Case("header is a JSON array", raw_weights(lambda raw: struct.pack("<Q", 2) + b"[]"), ("not a JSON object",)),
    Case("file shorter than the length prefix", raw_weights(lambda raw: raw[:4]), ("fewer than the 8-byte",)),
    Case("file truncated in the header", raw_weights(lambda raw: raw[:100]), ("header claims",)),
    Case("file truncated in the data", raw_weights(lambda raw: raw[: len(raw) // 2]), ("truncated", "re-download")),
    Case("trailing bytes after the data", raw_weights(lambda raw: raw + bytes(16)), ("after its last tensor",)),
    Case("tensors not packed", header_edit(shifted_first_tensor), ("back to back",)),
    Case("unknown dtype", header_edit(lambda h: h[DOWN].update(dtype="Q4")), ("'Q4'", DOWN)),
    Case("shape disagrees with its bytes", header_edit(lambda h: h[DOWN].update(shape=[1, 1])), ("needs", DOWN)),
    Case("tensor name in two shards", duplicated_shard, ("in both", "overlap")),
]
CONFIGS = [
    Case("config.json is a list", replace_json("config.json", [1, 2]), ("must be a JSON object", "array")),
    Case("hidden_size is a string", set_config(hidden_size="big"), ("hidden_size", "'big'")),
    Case("zero attention heads", set_config(num_attention_heads=0), ("num_attention_heads", "positive integer")),
    Case("negative intermediate size", set_config(intermediate_size=-64), ("intermediate_size",)),
    Case("layers as a float", set_config(num_hidden_layers=1.5), ("num_hidden_layers",)),
    Case("absurd context", set_config(max_position_embeddings=2**40), ("max_position_embeddings",)),
    Case("heads do not divide hidden", set_config(num_attention_heads=3, head_dim=None),
         ("not divisible by num_attention_heads",)),
    Case("kv heads do not divide heads", set_config(num_key_value_heads=3), ("num_key_value_heads",)),
    Case("rms_norm_eps is a string", set_config(rms_norm_eps="tiny"), ("rms_norm_eps",)),
    Case("tie_word_embeddings is a string", set_config(tie_word_embeddings="yes"), ("tie_word_embeddings",)),
    Case("eos_token_id is a word", set_config(eos_token_id="one"), ("eos_token_id", "'one'")),
    Case("rope_parameters is a list", set_config(rope_parameters=[1]), ("rope_parameters",)),
    Case("shapes disagree with the config", set_config(intermediate_size=96), ("has shape", "config.json implies")),
]
GENERATION = [
    Case("temperature is hot", set_generation(temperature="hot"), ("generation_config.json", "temperature", "'hot'")),
    Case("eos_token_id is a word (generation)", set_generation(eos_token_id="one"),
         ("generation_config.json", "eos_token_id")),
    Case("max_new_tokens is zero", set_generation(max_new_tokens=0), ("generation_config.json", "max_new_tokens")),
    Case("top_p out of range", set_generation(top_p=5.0), ("generation_config.json", "top_p")),
    Case("generation_config.json is a list", replace_json("generation_config.json", []),
         ("generation_config.json", "JSON object")),
    Case("eos_token is a number (tokenizer_config)", replace_json("tokenizer_config.json", {"eos_token": 5}),
         ("tokenizer_config.json", "eos_token", "got 5")),
    Case("shard index is a list", replace_json("model.safetensors.index.json", [1, 2]),
         ("model.safetensors.index.json is malformed", "weight_map")),
    Case("shard index maps to numbers", replace_json("model.safetensors.index.json", {"weight_map": {"a": 1}}),
         ("'weight_map' must map tensor names to shard file names",)),
]
WEIGHT_VALUES = [
    Case("untied and no lm_head.weight", tensors_edit(drop("lm_head.weight")), ("'lm_head.weight'", "tie_word")),
    Case("a tensor missing", tensors_edit(drop(DOWN)), ("missing", DOWN)),
    Case("an unexpected tensor", tensors_edit(add("model.layers.7.mlp.down_proj.weight")),
         ("not part of", "model.layers.7")),
    Case("int8 weights in a float model", tensors_edit(cast(DOWN, torch.int8)), ("I8", DOWN, "float dtype")),
    Case("fp8 weights in a float model", tensors_edit(cast(DOWN, torch.float8_e4m3fn)), ("F8_E4M3", DOWN)),
    Case("NaN in a weight", tensors_edit(nan_in(DOWN)), ("NaN/Inf", DOWN, "--force")),
    Case("NaN in a weight (serve)", tensors_edit(nan_in(DOWN), serve), ("NaN/Inf", DOWN, "--force")),
]
OPTIONS = [
    Case("probe --timeout nan", argv("probe", "--timeout", "nan", "--profile", "{tmp}/p.yaml"), ("--timeout nan",)),
    Case("probe --timeout -1", argv("probe", "--timeout", "-1", "--profile", "{tmp}/p.yaml"), ("--timeout -1",)),
    Case("probe --timeout inf", argv("probe", "--timeout", "inf", "--profile", "{tmp}/p.yaml"), ("--timeout inf",)),
    Case("verify-ops --timeout nan", argv("verify-ops", "--timeout", "nan"), ("--timeout nan",)),
    Case("verify-ops --checkpoint-every -5", argv("verify-ops", "--checkpoint-every", "-5"), ("--checkpoint-every",)),
    Case("verify-collectives --timeout nan", argv("verify-collectives", "--timeout", "nan"), ("--timeout nan",)),
    Case("verify-collectives --iters 0", argv("verify-collectives", "--iters", "0"), ("--iters 0",)),
    Case("bench --budget nan", argv("bench", "--budget", "nan"), ("--budget nan",)),
    Case("devices --device ''", argv("devices", "--device", "", "--profile", "{tmp}/p.yaml"), ("--device", "empty")),
    Case("generate --device ''", flags("--device", ""), ("--device", "empty")),
    Case("serve --device ''", argv("serve", "--device", " ", "--port", "0"), ("--device", "empty")),
    Case("generate --temperature 1e-30", flags("--temperature", "1e-30"), ("--temperature", "0.01")),
    Case("generate --temperature nan", flags("--temperature", "nan"), ("--temperature",)),
    Case("generate --temperature 5", flags("--temperature", "5"), ("--temperature",)),
    Case("generate --top-p 0", flags("--top-p", "0"), ("--top-p",)),
    Case("generate --repetition-penalty 50", flags("--repetition-penalty", "50"), ("--repetition-penalty",)),
    Case("generate --max-tokens 0", flags("--max-tokens", "0"), ("--max-tokens",)),
    Case("generate --max-tokens 2000000", flags("--max-tokens", "2000000"), ("--max-tokens",)),
    Case("generate --max-tokens 100000", flags("--max-tokens", "100000"), ("max_tokens", "context", "max_model_len")),
    Case("generate --seed -1", flags("--seed", "-1"), ("--seed",)),
]
PROFILES = [
    Case("alias bomb: profile show --json", profile_text(ALIAS_BOMB, "profile", "show", "--json", "{p}"),
         ("YAML anchor", "line 7")),
    Case("alias bomb: profile diff", profile_text(ALIAS_BOMB, "profile", "diff", "{p}", "{p}"), ("YAML anchor",)),
    Case("alias bomb: profile validate", profile_text(ALIAS_BOMB, "profile", "validate", "{p}"), ("YAML anchor",)),
    Case("alias bomb: probe --profile", profile_text(ALIAS_BOMB, "probe", "--device", "cpu", "--profile", "{p}"),
         ("YAML anchor",)),
    Case("alias bomb: generate --profile", profile_text(ALIAS_BOMB, "generate", "Hi", "--profile", "{p}"),
         ("YAML anchor",)),
    Case("an anchor alone", profile_text(ANCHOR_ONLY, "profile", "show", "{p}"), ("YAML anchor", "line 2")),
]
CORPUS = MODEL_FILES + CONFIGS + GENERATION + WEIGHT_VALUES + OPTIONS + PROFILES


@pytest.mark.parametrize("case", CORPUS, ids=lambda case: case.name)
def test_hostile_input_ends_in_one_line(case: Case, tmp_path: Path, good_model: Path) -> None:
    assert_one_line_error(run_cli(case.build(tmp_path, good_model)), *case.fragments)


# ---------------------------------------------------------------- what works, and what stays bounded


def test_the_good_model_generates(tmp_path: Path, good_model: Path) -> None:
    result = run_cli(generate(good_model, tmp_path, "--max-tokens", "3", "--json"))
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["completion_tokens"] == 3


def test_nan_weights_load_and_generate_with_force(tmp_path: Path, good_model: Path) -> None:
    """--force loads weights holding NaN, each such tensor logged: a NaN row of a token never read generates."""
    args = tensors_edit(nan_row("model.embed_tokens.weight", VOCAB - 1), generate, "--force", "--max-tokens", "2",
                        "--ignore-eos", "--json")
    result = run_cli(args(tmp_path, good_model))
    assert result.code == 0, result.stderr
    assert "NaN/Inf" in result.stderr and "model.embed_tokens.weight" in result.stderr and "--force" in result.stderr
    generated = json.loads(result.stdout)
    assert generated["completion_tokens"] == 2 and VOCAB - 1 not in generated["token_ids"]


def test_forced_nan_weights_that_reach_the_logits_end_in_one_line(tmp_path: Path, good_model: Path) -> None:
    """NaN in every token's path: loaded with --force, and the engine refuses to serve the NaN logits."""
    args = tensors_edit(nan_in(DOWN), generate, "--force", "--max-tokens", "2")
    result = run_cli(args(tmp_path, good_model))
    assert DOWN in result.stderr  # the load-time warning
    assert_one_line_error(result, "NaN")


def test_a_tied_model_may_carry_its_unread_lm_head(tmp_path: Path) -> None:
    model = tmp_path / "tied"
    make_hf_model(model, tied=True, hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64)
    tensors = load_file(model / WEIGHTS)
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()
    save_file(tensors, model / WEIGHTS)
    result = run_cli(generate(model, tmp_path, "--max-tokens", "2"))
    assert result.code == 0, result.stderr


def test_a_generation_default_out_of_the_request_range_names_its_source(tmp_path: Path, good_model: Path) -> None:
    model = copied(tmp_path, good_model)
    edit_json(model, "generation_config.json", lambda gen: gen.update(temperature=5.0))
    assert_one_line_error(run_cli(generate(model, tmp_path)), "generation_config.json", "--temperature")
    assert run_cli(generate(model, tmp_path, "--temperature", "0", "--max-tokens", "2")).code == 0


def test_the_alias_bomb_is_refused_fast(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB)
    start = time.perf_counter()
    with pytest.raises(BringupError, match="YAML anchor"):
        load_profile(path)
    assert time.perf_counter() - start < 1.0


def _two_gib_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_the_alias_bomb_stays_bounded_in_a_real_process(tmp_path: Path) -> None:
    """`profile show --json` used to grow to an 8 GB cap; now it ends at once under a 2 GiB address space."""
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB)
    done = subprocess.run([sys.executable, "-m", "bringup", "profile", "show", "--json", str(path)],
                          capture_output=True, text=True, timeout=120, preexec_fn=_two_gib_address_space)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and "YAML anchor" in done.stderr and "Traceback" not in done.stderr


def test_reference_profiles_with_stars_in_their_text_still_load() -> None:
    """A `*` inside a quoted string is no alias: the reference profiles (which hold some) load as before."""
    reference = Path(__file__).resolve().parents[2] / "reference" / "profiles"
    paths = sorted(reference.glob("*.yaml"))
    assert paths and all("*" in p.read_text() for p in paths)
    for path in paths:
        assert load_profile(path).device is not None
