"""The reference file of `bringup eval`: written whole or not at all, read back as written, damage refused."""

from __future__ import annotations

import os
import stat

import pytest

from bringup.errors import BringupError
from bringup.profiles import profile_file
from bringup.profiles.profile_file import default_mode
from bringup.runner.eval.reference_file import load_reference
from bringup.runner.eval.reference_header import SCHEMA
from bringup.runner.eval.run import eval_tokens, run_eval
from bringup.runner.eval.settings import EvalSettings
from bringup.runner.eval.text import default_text

SETTINGS = EvalSettings(ctx=64, stride=32, max_tokens=150)


def evaluate(engine, save_to, **kwargs):
    text = default_text()
    tokens = eval_tokens(engine, text, SETTINGS, None)
    return run_eval(engine, None, text, tokens, SETTINGS, None, save_to, **kwargs)


def test_round_trip(builtin_engine, tmp_path):
    out = tmp_path / "ref.safetensors"
    result = evaluate(builtin_engine, out, k=8)
    header, rows = load_reference(out)
    assert header.schema == SCHEMA and (header.k, header.ctx, header.stride, header.tokens) == (8, 64, 32, 150)
    assert header.model == builtin_engine.model_name and header.dtype == "float32" and header.device == "cpu"
    assert header.vocab_size == builtin_engine.vocab_size and header.versions["torch"]
    assert rows.ids.shape == (149, 8) and rows.target_logprobs.shape == (149,)
    assert bool((rows.logprobs[:, :-1] >= rows.logprobs[:, 1:]).all())  # descending
    assert float(-rows.target_logprobs.double().mean()) == pytest.approx(result.nll.nll, rel=1e-6)
    assert stat.S_IMODE(out.stat().st_mode) == default_mode()


def test_interrupted_run_leaves_no_file(builtin_engine, tmp_path):
    out = tmp_path / "ref.safetensors"

    def interrupt(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        evaluate(builtin_engine, out, on_window=interrupt)
    assert os.listdir(tmp_path) == []
    assert builtin_engine.blocks.num_free == builtin_engine.blocks.num_blocks  # the window's blocks given back


def test_a_directory_in_the_way_is_refused_and_nothing_is_left(builtin_engine, tmp_path):
    target = tmp_path / "taken"
    target.mkdir()
    with pytest.raises(BringupError, match="is a directory"):
        evaluate(builtin_engine, target)
    assert os.listdir(tmp_path) == ["taken"] and os.listdir(target) == []


def test_failed_rename_leaves_no_temporary_file(builtin_engine, tmp_path, monkeypatch):
    def refuse(source, destination):  # the data is written and synced; the rename fails (a full or read-only disk)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(profile_file.os, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        evaluate(builtin_engine, tmp_path / "ref.safetensors")
    assert os.listdir(tmp_path) == []


def test_damaged_file_is_refused(builtin_engine, tmp_path):
    out = tmp_path / "ref.safetensors"
    evaluate(builtin_engine, out, k=4)
    data = bytearray(out.read_bytes())
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(bytes(data[: len(data) - 40]))
    with pytest.raises(BringupError, match="not a safetensors file"):
        load_reference(cut)
    edited = tmp_path / "edited.safetensors"
    field = b'\\"tokens\\": 150'  # inside the header's JSON string, quotes are escaped
    assert field in data
    edited.write_bytes(bytes(data).replace(field, field[:-1] + b"1"))
    with pytest.raises(BringupError, match="does not match its header"):
        load_reference(edited)
