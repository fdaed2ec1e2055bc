"""`verify-ops --model DIR`: the catalog's ops at a saved model's own shapes and dtype, written to the profile."""

import json

import pytest

from bringup.probes.ops.catalog.model import model_cases
from bringup.probes.ops.model_shapes import ModelConfigError, read_model_shapes, shapes_from_config
from bringup.profiles.store import load_profile
from tests.cli.run_cli import run_cli

transformers = pytest.importorskip("transformers")

HIDDEN, EXPERTS, VOCAB = 72, 6, 1009


@pytest.fixture(scope="module")
def qwen3_moe_dir(tmp_path_factory):
    """A saved random-init Qwen3-MoE with small odd sizes (weights and config.json, as from the hub)."""
    import torch

    config = transformers.Qwen3MoeConfig(
        hidden_size=HIDDEN, num_attention_heads=6, num_key_value_heads=2, head_dim=12, intermediate_size=88,
        moe_intermediate_size=40, num_experts=EXPERTS, num_experts_per_tok=2, vocab_size=VOCAB,
        max_position_embeddings=2048, num_hidden_layers=1, norm_topk_prob=True)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("qwen3-moe")
    transformers.Qwen3MoeForCausalLM(config).to(torch.float32).save_pretrained(folder)
    return folder


def _verify(*args):
    result = run_cli(["verify-ops", "--json", *args])
    doc = json.loads(result.stdout) if result.stdout.strip().startswith("{") else None
    return result, doc


def test_model_run_covers_the_models_shapes_and_lands_in_the_profile(tmp_path, qwen3_moe_dir):
    profile = tmp_path / "p.yaml"
    result, doc = _verify("--no-isolate", "--model", str(qwen3_moe_dir), "--profile", str(profile))
    assert result.code == 0, result.stderr
    cases = doc["cases"]
    assert {c["dtype"] for c in cases} == {"float32"}  # the model's dtype, not the catalog's three
    assert all(c["case"].startswith("model: ") for c in cases)
    assert {c["status"] for c in cases if c["op"] not in ("sdpa_efficient", "sdpa_cudnn")} == {"pass"}
    labels = " | ".join(c["case"] for c in cases)
    for shape in (f"hidden [1,{HIDDEN}]", f"[{EXPERTS},{HIDDEN}] tokens=1 top=2", f"vocab={VOCAB}",
                  "[1,6,1,12] [1,2,2048,12]", f"[{EXPERTS},72,40]", "[1,72] [1009,72]", "renormalised"):
        assert shape in labels, shape
    assert "not renormalised" not in labels
    ops = {c["op"] for c in cases}
    assert ops >= {"linear", "rms_norm", "rotary", "softmax", "embedding", "silu", "sdpa_math", "moe_router",
                   "moe_group_tokens", "index_add", "scatter_add", "grouped_matmul"}
    assert not ops & {"sliding_window_mask", "tanh_softcap", "matmul", "cast"}  # not this model's
    recorded = load_profile(profile).ops
    assert {(r.op, r.dtype, r.case) for r in recorded} == {(c["op"], c["dtype"], c["case"]) for c in cases}


def test_model_shapes_reach_the_isolated_worker(tmp_path, qwen3_moe_dir):
    result, doc = _verify("--model", str(qwen3_moe_dir), "--profile", str(tmp_path / "p.yaml"), "--op",
                          "moe_router", "--op", "grouped_matmul", "--dtype", "bfloat16", "-k", "tokens=1 ")
    assert result.code == 0, result.stderr
    assert len(doc["cases"]) == 5 and {c["status"] for c in doc["cases"]} == {"pass"}
    assert {c["dtype"] for c in doc["cases"]} == {"bfloat16"}  # --dtype overrides the model's


def test_gemma2_config_brings_sliding_window_and_softcap(tmp_path):
    config = transformers.Gemma2Config(hidden_size=48, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                       intermediate_size=96, vocab_size=311, max_position_embeddings=256,
                                       sliding_window=24, attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                                       num_hidden_layers=2)
    config.save_pretrained(tmp_path / "gemma2")
    result, doc = _verify("--no-isolate", "--model", str(tmp_path / "gemma2"), "--profile", str(tmp_path / "p.yaml"),
                          "--op", "sliding_window_mask", "--op", "tanh_softcap", "--op", "gelu", "--dtype", "float32")
    assert result.code == 0, result.stderr
    labels = {c["op"]: [] for c in doc["cases"]}
    for c in doc["cases"]:
        labels[c["op"]].append(c["case"])
        assert c["status"] == "pass", c
    assert any("window=24" in label for label in labels["sliding_window_mask"])
    assert any("cap=50" in label for label in labels["tanh_softcap"])
    assert any("cap=30 vocab=311" in label for label in labels["tanh_softcap"])
    assert all("gelu_pytorch_tanh [" in label and "intermediate=96" in label for label in labels["gelu"])


def test_missing_or_bad_config_is_one_line_exit_2(tmp_path, qwen3_moe_dir):
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 10}))
    for folder, words in ((empty, "no config.json"), (tmp_path / "bad", "has no hidden_size"),
                          (tmp_path / "nowhere", "not a directory")):
        result = run_cli(["verify-ops", "--model", str(folder), "--profile", str(tmp_path / "p.yaml")])
        assert result.code == 2 and words in result.stderr and "Traceback" not in result.stderr, result
        assert len([line for line in result.stderr.splitlines() if line.startswith("error")]) == 1
    result = run_cli(["verify-ops", "--model", str(qwen3_moe_dir), "--op", "tanh_softcap",
                      "--profile", str(tmp_path / "p.yaml")])
    assert result.code == 2 and "no cases at the model's shapes" in result.stderr


def test_config_fields_are_read_directly_and_caps_are_labelled():
    mixtral = shapes_from_config({"model_type": "mixtral", "hidden_size": 4096, "num_attention_heads": 32,
                                  "num_key_value_heads": 8, "intermediate_size": 14336, "num_local_experts": 8,
                                  "num_experts_per_tok": 2, "vocab_size": 32000, "max_position_embeddings": 131072,
                                  "sliding_window": None, "torch_dtype": "bfloat16"})
    assert (mixtral.head_dim, mixtral.experts, mixtral.expert_intermediate) == (128, 8, 14336)
    assert mixtral.renormalize_topk and mixtral.dtype == "bfloat16" and mixtral.sliding_window is None
    cases = model_cases(mixtral)
    sdpa = [c.label for c in cases["sdpa_math"]]
    assert any("[1,8,16384,128] capped below max_positions=131072" in label for label in sdpa)
    grouped = [c.label for c in cases["grouped_matmul"]]
    # 8 x 4096 x 14336 float64 is too big: one expert's weights
    assert all(("[1,4096,14336]" in label or "[1,14336,4096]" in label) and "experts capped from=8" in label
               for label in grouped)
    qwen2 = shapes_from_config({"hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100,
                                "sliding_window": 4096, "use_sliding_window": False})
    assert qwen2.sliding_window is None and "sliding_window_mask" not in model_cases(qwen2)
    with pytest.raises(ModelConfigError, match="num_attention_heads"):
        shapes_from_config({"hidden_size": 64, "num_attention_heads": 0, "vocab_size": 100})


def test_read_model_shapes_uses_text_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "vlm", "torch_dtype": "bfloat16", "text_config": {
        "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100}}))
    shapes = read_model_shapes(tmp_path)
    assert (shapes.hidden, shapes.head_dim, shapes.dtype) == (64, 16, "bfloat16")
