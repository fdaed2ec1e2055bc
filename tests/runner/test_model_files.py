"""The model directory's jail (bringup/runner/model_files.py) and the free-memory check, on real files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from bringup.errors import BringupError
from bringup.json_depth import json_depth
from bringup.runner.model_files import (
    MAX_JSON_DEPTH,
    decode_json,
    model_file,
    model_roots,
    read_json,
    read_text,
)
from bringup.runner.sources.directory.validate import TensorSpec, check_fits, weight_bytes


def test_json_depth_counts_brackets_outside_strings_only() -> None:
    assert json_depth(b"{}") == 1
    assert json_depth(b'{"a": [1, {"b": []}]}') == 4
    assert json_depth(b'{"a": "[[[[{{{{", "b": "\\"[[[", "c": "\\\\"}') == 1  # escaped quotes end no string
    assert json_depth(b"42") == 0


def test_json_nested_past_the_limit_is_refused_before_parsing() -> None:
    ok = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert decode_json(ok) is not None
    with pytest.raises(ValueError, match=f"nests {MAX_JSON_DEPTH + 1} levels deep"):
        decode_json(b"[" + ok + b"]")
    with pytest.raises(ValueError, match="nests 1000000 levels deep"):  # a RecursionError if it reached json
        decode_json(b"{" * 1_000_000)


def test_read_json_names_the_file_and_why(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(b'{"a": "\xc3"}')
    with pytest.raises(BringupError, match=r"config.json is not UTF-8 text \(byte 7"):
        read_json(tmp_path, "config.json")
    (tmp_path / "config.json").write_text('{"a": 1')
    with pytest.raises(BringupError, match=r"config\.json is not valid JSON"):
        read_json(tmp_path, "config.json")
    (tmp_path / "config.json").write_text(json.dumps({"a": [1]}))
    assert read_json(tmp_path, "config.json") == {"a": [1]}
    with pytest.raises(BringupError, match="larger than the 0 MiB"):
        read_json(tmp_path, "config.json", max_bytes=4)


def test_a_control_character_in_a_file_name_is_shown_escaped(tmp_path: Path) -> None:
    with pytest.raises(BringupError) as refused:
        model_file(tmp_path, "\x1b[2Jshard.safetensors")
    assert "\x1b" not in str(refused.value) and "\\x1b[2Jshard.safetensors is missing" in str(refused.value)


def test_links_resolve_inside_or_are_refused(tmp_path: Path) -> None:
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "sub" / "real.txt").write_text("inside")
    (model / "inner").symlink_to("sub/real.txt")
    (model / "loop").symlink_to("loop")
    (tmp_path / "outside.txt").write_text("outside")
    (model / "outer").symlink_to("../outside.txt")
    assert model_file(model, "inner") == (model / "sub" / "real.txt").resolve()
    assert read_text(model, "inner", 100) == "inside"
    with pytest.raises(BringupError, match="outside the model directory"):
        model_file(model, "outer")
    with pytest.raises(BringupError, match="outside the model directory"):
        model_file(model, "../outside.txt")
    with pytest.raises(BringupError, match="outside the model directory"):
        model_file(model, str(tmp_path / "outside.txt"))
    with pytest.raises(BringupError, match=r"loop cannot be resolved"):
        model_file(model, "loop")
    with pytest.raises(BringupError, match="is a directory"):
        model_file(model, "sub")


def test_a_model_directory_given_through_a_link_is_jailed_at_its_real_place(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "config.json").write_text("{}")
    (tmp_path / "alias").symlink_to(real)
    assert read_json(tmp_path / "alias", "config.json") == {}
    assert model_roots(tmp_path / "alias") == (real.resolve(),)


def test_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "config.json")  # opening it for reading would block: no writer ever comes
    with pytest.raises(BringupError, match="FIFO"):
        read_json(tmp_path, "config.json")


def test_hub_snapshot_roots(tmp_path: Path) -> None:
    repo = tmp_path / "models--org--name"
    snapshot = repo / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    assert model_roots(snapshot) == (snapshot.resolve(),)  # no blobs/: no exception
    (repo / "blobs").mkdir()
    assert model_roots(snapshot) == (snapshot.resolve(), (repo / "blobs").resolve())
    assert model_roots(repo) == (repo.resolve(),)  # the repository itself is no snapshot


def test_weights_are_measured_in_the_dtype_they_will_be_held_in(tmp_path: Path) -> None:
    specs = [TensorSpec("a", (1024, 1024), "F16", tmp_path), TensorSpec("b", (1024,), "BF16", tmp_path)]
    assert weight_bytes(specs, torch.float32) == (1024 * 1024 + 1024) * 4
    assert weight_bytes(specs, torch.bfloat16) == (1024 * 1024 + 1024) * 2
    check_fits(tmp_path, specs, torch.bfloat16, weight_bytes(specs, torch.bfloat16), "cpu")  # exactly fits
    check_fits(tmp_path, specs, torch.float32, None, "cpu")  # the backend cannot say: no refusal on a guess
    with pytest.raises(BringupError) as refused:
        check_fits(tmp_path, specs, torch.float32, 3 << 20, "cuda:0")
    message = str(refused.value)
    assert "the weights need 4.00 MiB as float32 (2 tensors) but cuda:0 has 3.00 MiB free" in message
