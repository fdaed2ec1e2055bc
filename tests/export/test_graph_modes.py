"""The engines' graph settings from verify-ops' eager-against-replay records: vLLM's cudagraph_mode and llama.cpp's
GGML_CUDA_DISABLE_GRAPHS, each present with its reason or left out saying why."""

from __future__ import annotations

from bringup.export import export_config
from bringup.profiles.schema import DeviceSection
from bringup.profiles.sections.ops import CompiledRecord
from tests.export.built import verified
from tests.export.lookups import reason_left_out, value

MODE = "--compilation-config"
LLAMA = "GGML_CUDA_DISABLE_GRAPHS"


def on_cuda(profile):  # type: ignore[no-untyped-def]
    return profile.model_copy(update={"device": DeviceSection(id="cuda:0", backend="cuda", name="Test GPU")})


def test_without_replay_records_vllm_runs_no_graphs_and_says_what_to_run():
    config = export_config(verified(host=False), "vllm")
    assert value(config, MODE) == '{"cudagraph_mode":"NONE"}'
    reason = config.setting(MODE).reason
    assert "not verified" in reason and "bringup verify-ops --compiled" in reason


def test_with_enforce_eager_the_graph_mode_is_left_out():
    profile = verified(host=False)
    profile.compiled.append(CompiledRecord(target="rms_norm", dtype="bfloat16", backend="inductor",
                                           status="mismatch", eager_err=1e-3, compiled_err=5e-2, allowed=3e-3))
    config = export_config(profile, "vllm")
    assert "--enforce-eager" in config.argv
    assert reason_left_out(config, MODE) == "--enforce-eager already runs without graphs"


def test_llama_cpp_disables_cuda_graphs_without_replay_records_and_ignores_other_devices():
    config = export_config(on_cuda(verified(host=False)), "llama.cpp")
    assert value(config, LLAMA) == "1" and config.environment[LLAMA] == "1"
    assert "not verified" in config.setting(LLAMA).reason
    assert reason_left_out(export_config(verified(host=True), "llama.cpp"), LLAMA) == (
        "llama.cpp reads it in its CUDA backend only; this profile's device is cpu")
