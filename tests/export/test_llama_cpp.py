"""llama-server's flags from injected evidence: each flag present when its evidence is, and absent with a stated
reason when the evidence is missing or negative; and the note on which GGUF types the device verified."""

from __future__ import annotations

import pytest

from bringup.export import export_config
from bringup.export.config import EngineConfig
from bringup.profiles.sections.ops import OpCaseRecord
from tests.export.built import gguf_file, host_device, tuned, tuned_as_text, unsupported, verified, with_plan
from tests.export.lookups import reason_left_out, value


def llama(profile, model=None) -> EngineConfig:
    return export_config(profile, "llama.cpp", None if model is None else str(model))


def test_the_command_is_llama_server_on_the_gguf_file(tmp_path):
    path = gguf_file(tmp_path)
    config = llama(verified(), path)
    assert config.argv[:3] == ["llama-server", "-m", str(path)]
    assert "llama-cpp-python 0.3.36" in config.engine_version
    assert config.environment == {}


# -t

def test_threads_are_the_usable_cores_of_the_host():
    assert value(llama(verified(host=True)), "-t") == "4"


def test_threads_are_one_per_physical_core_with_smt():
    profile = verified(host=True).model_copy(update={"device": host_device(logical=8, physical=4, usable=8)})
    config = llama(profile)
    assert value(config, "-t") == "4" and "one per physical core" in config.setting("-t").reason


def test_threads_on_an_accelerator_come_from_the_environment_report():
    config = llama(verified(host=False))
    assert value(config, "-t") == "8"  # "16 logical, 8 physical, 16 usable"
    assert config.setting("-t").evidence == ("environment.cpu.cores: 16 logical, 8 physical, 16 usable",)


def test_threads_are_left_out_when_the_profile_does_not_count_cores():
    profile = verified(host=False)
    profile.environment.cpu.clear()
    config = llama(profile)
    assert "does not count the host's cores" in reason_left_out(config, "-t")
    assert "bringup env" in config.left_out("-t").to_get


# -ngl

def test_no_layers_offloaded_on_the_host():
    setting = llama(verified(host=True)).setting("-ngl")
    assert setting.value == "0" and "already are in host memory" in setting.reason


def test_every_layer_offloaded_when_tune_ran_this_file_on_the_device(tmp_path):
    path = gguf_file(tmp_path)
    config = llama(with_plan(verified(host=False), tuned(str(path), device="accel:0")), path)
    assert value(config, "-ngl") == "all" and "ran every layer of this file" in config.setting("-ngl").reason


def test_a_plan_tuned_on_another_device_is_no_evidence_the_file_fits(tmp_path):
    path = gguf_file(tmp_path, size=4096)
    config = llama(with_plan(verified(host=False, free=4000, total=8000), tuned(str(path), device="cpu")), path)
    assert "do not fit" in reason_left_out(config, "-ngl")


def test_every_layer_offloaded_when_the_file_fits_the_measured_free_memory(tmp_path):
    path = gguf_file(tmp_path, size=4096)
    assert value(llama(verified(host=False), path), "-ngl") == "all"


def test_layers_left_to_llama_fit_when_the_file_does_not_fit(tmp_path):
    path = gguf_file(tmp_path, size=4096)
    config = llama(verified(host=False, free=4000, total=8000), path)
    assert "do not fit" in reason_left_out(config, "-ngl") and "--fit" in config.left_out("-ngl").reason


def test_layers_left_out_without_a_model_file_or_measured_memory(tmp_path):
    assert "no model file" in reason_left_out(llama(verified(host=False)), "-ngl")
    profile = verified(host=False)
    profile.capabilities.memory.clear()
    assert "not measured" in reason_left_out(llama(profile, gguf_file(tmp_path)), "-ngl")


# -fa

def test_flash_attention_on_when_a_fused_attention_check_passed_at_the_dtype():
    config = llama(verified())
    assert value(config, "-fa") == "on" and "sdpa_flash" in config.setting("-fa").reason


def test_flash_attention_left_out_when_the_fused_kernels_failed():
    profile = verified()
    profile.capabilities.attention["sdpa_flash"] = unsupported("no viable backend")
    assert "no fused attention kernel passed" in reason_left_out(llama(profile), "-fa")


def test_flash_attention_left_out_when_a_fused_kernels_op_case_failed():
    profile = verified()
    profile.ops.append(OpCaseRecord(op="sdpa_flash", dtype="bfloat16", case="[1,4,33,80] mask=float", status="fail"))
    assert "sdpa_flash 1 op case(s) failed" in reason_left_out(llama(profile), "-fa")


def test_flash_attention_left_out_when_attention_was_not_checked():
    profile = verified()
    profile.capabilities.attention.clear()
    config = llama(profile)
    assert "were not run" in reason_left_out(config, "-fa")
    assert config.left_out("-fa").to_get == "run `bringup probe`"


# -ctk / -ctv

def test_kv_cache_types_are_the_verified_dtype(tmp_path):
    path = gguf_file(tmp_path)
    config = llama(with_plan(verified(), tuned(str(path), dtype="float32")), path)
    assert (value(config, "-ctk"), value(config, "-ctv")) == ("f32", "f32")
    assert "the dtype the tuned plan served" in config.setting("-ctk").reason
    assert value(llama(verified()), "-ctk") == "bf16"


def test_kv_cache_types_left_out_when_no_dtype_is_verified():
    config = llama(verified().model_copy(update={"ops": []}))
    for flag in ("-ctk", "-ctv"):
        assert "no dtype is verified" in reason_left_out(config, flag)


# -c, -np, -b, -ub

def test_context_slots_and_batches_come_from_the_tuned_plan(tmp_path):
    path = gguf_file(tmp_path)
    config = llama(with_plan(verified(), tuned(str(path), seqs=4, length=1024, step=2048, kv=256)),
                   path)
    assert [value(config, f) for f in ("-c", "-np", "-b", "-ub")] == ["4096", "4", "2048", "2048"]
    assert "divides -c among the -np slots" in config.setting("-c").reason


def test_context_is_capped_at_the_tokens_the_plans_kv_cache_holds(tmp_path):
    path = gguf_file(tmp_path)
    config = llama(with_plan(verified(), tuned(str(path), seqs=8, length=1024, kv=128)), path)
    assert value(config, "-c") == "2048" and "capped at the 2048 tokens" in config.setting("-c").reason


def test_plan_sizes_are_not_read_from_a_record_an_older_tune_wrote_as_text(tmp_path):
    path = gguf_file(tmp_path)
    config = llama(with_plan(verified(), tuned_as_text(str(path), seqs=4, length=1024, step=2048, kv=256)), path)
    for flag in ("-c", "-np", "-b", "-ub"):
        assert "records its plan as text" in reason_left_out(config, flag), flag
    assert config.left_out("-c").to_get.startswith("run `bringup tune --model ")
    assert "models[m [abababab]].plan.max_num_seqs: 4 (measured max_num_seqs)" in config.left_out("-c").evidence


def test_plan_sizes_left_out_without_a_plan(tmp_path):
    config = llama(verified(), gguf_file(tmp_path))
    for flag in ("-c", "-np", "-b", "-ub"):
        assert "no tuned plan" in reason_left_out(config, flag)
        assert config.left_out(flag).to_get.startswith("run `bringup tune --model ")


# GGUF types

def note(config: EngineConfig) -> str:
    return next(n.text for n in config.notes if n.topic == "gguf_types")


def test_gguf_note_names_the_block_types_whose_kernels_verified_and_never_the_k_quants():
    text = note(llama(verified()))
    verified_part, unverified_part = text.split("not verified:")
    assert "Q8_0" in verified_part and "Q4_0" in verified_part and "F16" in verified_part
    assert "Q4_K" in unverified_part and "Q6_K" in unverified_part
    assert "Prefer Q8_0 or Q4_0/Q4_1 files to K-quants" in text


@pytest.mark.parametrize("status", ["fail", "error"])
def test_gguf_note_drops_a_block_type_whose_kernel_computed_wrong(status):
    profile = verified()
    profile.ops.append(OpCaseRecord(op="_weight_int4pack_mm_for_cpu", dtype="float32", case="decode", status=status))
    text = note(llama(profile))
    assert "Q4_0" in text.split("not verified:")[1] and "Prefer Q8_0 files" in text


def test_gguf_note_says_what_to_run_when_no_quantized_matmul_was_checked():
    profile = verified()
    for feature in ("int8_weight_only_matmul", "int4_weight_only_matmul"):
        del profile.capabilities.features[feature]
    found = next(n for n in llama(profile).notes if n.topic == "gguf_types")
    assert "no block-quantized type is verified" in found.text
    assert found.to_get == "run `bringup probe --only features.int8_weight_only_matmul`"
