"""Which model an export names and which tuned plan it takes: a plan's key or name, a path, or (without --model) the
latest plan the engine can load; a model that is not there, or that the engine cannot load, is one clear error."""

from __future__ import annotations

import pytest

from bringup.errors import BringupError
from bringup.export import export_config
from tests.export.built import gguf_file, model_dir, tuned, verified, with_plan


def test_without_model_or_plan_the_model_is_a_placeholder_and_the_note_says_to_tune():
    config = export_config(verified(), "vllm")
    assert config.model.path == "MODEL_DIR" and not config.model.given and config.model.tuned is None
    note = next(n for n in config.notes if n.topic == "tuned_plan")
    assert "bringup tune --model MODEL" in note.to_get
    assert export_config(verified(), "llama.cpp").model.path == "MODEL.gguf"


def test_without_model_the_latest_plan_of_a_kind_the_engine_loads_is_taken(tmp_path):
    folder, path = model_dir(tmp_path), gguf_file(tmp_path)
    profile = with_plan(with_plan(with_plan(
        verified(), tuned(str(folder), at="2026-12-01T00:00:00+00:00"), "dir old [1]"),
        tuned(str(folder), at="2026-12-02T00:00:00+00:00"), "dir new [2]"),
        tuned(str(path), at="2026-12-03T00:00:00+00:00"), "gguf [3]")
    config = export_config(profile, "vllm")
    assert (config.model.path, config.model.tuned) == (str(folder), "dir new [2]")
    assert "also tuned: dir old [1]" in next(n.text for n in config.notes if n.topic == "tuned_plan")
    assert export_config(profile, "llama.cpp").model.tuned == "gguf [3]"


def test_a_plan_tuned_on_the_built_in_model_is_not_taken():
    profile = with_plan(verified(), tuned("built-in"), "builtin [1]")
    config = export_config(profile, "vllm")
    assert not config.model.given and "builtin [1] (the built-in model)" in config.notes[0].text


def test_model_by_key_name_or_path_finds_its_plan(tmp_path):
    folder = model_dir(tmp_path)
    profile = with_plan(verified(), tuned(str(folder), model="SmolLM2"), "SmolLM2 [abcd1234]")
    for given in ("SmolLM2 [abcd1234]", "SmolLM2", str(folder), str(folder) + "/"):
        config = export_config(profile, "vllm", given)
        assert (config.model.path, config.model.tuned) == (str(folder), "SmolLM2 [abcd1234]"), given


def test_a_path_without_a_plan_is_used_and_the_plan_settings_say_to_tune_it(tmp_path):
    path = gguf_file(tmp_path)
    config = export_config(verified(), "llama.cpp", str(path))
    assert config.model.given and config.model.tuned is None
    assert config.left_out("-np").to_get == f"run `bringup tune --model {path}`"


@pytest.mark.parametrize("engine, make, said", [
    ("vllm", lambda root: gguf_file(root), "loads a Hugging Face model directory"),
    ("llama.cpp", lambda root: model_dir(root), "loads a GGUF file, and this is a directory"),
])
def test_a_model_the_engine_cannot_load_is_refused(tmp_path, engine, make, said):
    with pytest.raises(BringupError, match=said):
        export_config(verified(), engine, str(make(tmp_path)))


def test_a_plan_tuned_on_the_other_kind_of_model_is_refused_when_named(tmp_path):
    profile = with_plan(verified(), tuned(str(model_dir(tmp_path)), model="SmolLM2"), "SmolLM2 [1]")
    with pytest.raises(BringupError, match="tuned on a Hugging Face model directory"):
        export_config(profile, "llama.cpp", "SmolLM2")


def test_the_built_in_model_named_is_refused():
    profile = with_plan(verified(), tuned("built-in", model="bringup-builtin"), "bringup-builtin [1]")
    with pytest.raises(BringupError, match="built-in model, which only bringup can run"):
        export_config(profile, "vllm", "bringup-builtin")


def test_a_model_that_does_not_exist_is_refused_naming_the_tuned_plans(tmp_path):
    profile = with_plan(verified(), tuned(str(model_dir(tmp_path))), "m [1]")
    with pytest.raises(BringupError, match=r"no such file or directory.*\(tuned: m \[1\]\)"):
        export_config(profile, "vllm", str(tmp_path / "nowhere"))


@pytest.mark.parametrize("engine", [None, "", "sglang", "VLLM "])
def test_engine_names(engine):
    if engine == "VLLM ":
        assert export_config(verified(), engine).engine == "vllm"
        return
    with pytest.raises(BringupError, match=r"vllm, llama\.cpp"):
        export_config(verified(), engine)
