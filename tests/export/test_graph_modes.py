"""The engines' graph settings from verify-ops' eager-against-replay records: vLLM's cudagraph_mode and llama.cpp's
GGML_CUDA_DISABLE_GRAPHS, each present with its reason or left out saying why."""

from __future__ import annotations

from bringup.export import export_config
from bringup.profiles.schema import DeviceSection
from bringup.profiles.sections.graph_replay import GraphReplayRecord
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
        "the device is the host: llama.cpp captures graphs only on a GPU")


def with_replay(profile, *statuses: tuple[str, str]):  # type: ignore[no-untyped-def]
    profile.graph_replay = [GraphReplayRecord(target=target, dtype="bfloat16", status=status, replays=2,
                                              first_bad_op="aten.silu.default" if status == "mismatch" else None,
                                              message="emu: graph capture refused aten::rsqrt.out"
                                              if status == "capture_unsupported" else None)
                            for target, status in statuses]
    return profile


def test_a_verified_decode_step_keeps_the_engines_defaults_citing_the_records():
    profile = on_cuda(with_replay(verified(host=False), ("runner_decode_step", "pass"), ("swiglu_mlp", "pass")))
    vllm, llama = export_config(profile, "vllm"), export_config(profile, "llama.cpp")
    assert reason_left_out(vllm, MODE).startswith("not needed: vLLM's default graph mode (FULL_AND_PIECEWISE")
    assert vllm.left_out(MODE).evidence == ("graph_replay: runner_decode_step at bfloat16: pass",
                                            "graph_replay: swiglu_mlp at bfloat16: pass")
    assert reason_left_out(llama, LLAMA).startswith("not needed: llama.cpp captures its decode graph")


def test_blocks_alone_give_piecewise_and_a_wrong_or_refused_step_no_graphs():
    blocks = with_replay(verified(host=False), ("swiglu_mlp", "pass"))
    assert value(export_config(blocks, "vllm"), MODE) == '{"cudagraph_mode":"PIECEWISE"}'
    wrong = on_cuda(with_replay(verified(host=False), ("runner_decode_step", "mismatch")))
    config = export_config(wrong, "vllm")
    assert value(config, MODE) == '{"cudagraph_mode":"NONE"}' and "aten.silu.default" in config.setting(MODE).reason
    llama = export_config(wrong, "llama.cpp")
    assert value(llama, LLAMA) == "1" and "aten.silu.default" in llama.setting(LLAMA).reason
    refused = with_replay(verified(host=False), ("runner_decode_step", "capture_unsupported"))
    assert "refused aten::rsqrt.out" in export_config(refused, "vllm").setting(MODE).reason
