"""The serve group, the LLM speed card: a real batch-1 serving run through the runner, its figures and samples."""

from bringup.probes.bench.groups.serve import MAX_SAMPLES, bounded
from bringup.profiles.store import load_profile
from tests.cli.run_cli import run_cli
from tests.real_model import smollm2_hf_dir
from tests.runner.hf_fixtures import make_hf_model, save_tokenizer

KEYS = {"decode_b1", "prefill_b1", "ttft", "inter_token"}


def serve_records(tmp_path, *extra: str) -> dict:
    path = tmp_path / "cpu.yaml"
    result = run_cli(["bench", "--quick", "--only", "serve", "--device", "cpu", "--profile", str(path), *extra])
    assert result.code == 0, result.stderr[-2000:]
    return {r.key: r for r in load_profile(path).bench.groups["serve"].records}


def assert_card(records: dict, model: str) -> None:
    assert set(records) == KEYS and all(r.status == "ok" for r in records.values())
    requests, new_tokens = records["ttft"].params["requests"], records["ttft"].params["new_tokens"]
    for key in ("ttft", "inter_token"):
        r = records[key]
        assert 0 < r.params["p50_s"] <= r.params["p90_s"] <= r.params["p99_s"] <= max(r.params["samples_s"]) + 1e-6
        assert r.median_s == r.params["p50_s"] and r.iqr_s is not None and r.iqr_s >= 0
    assert records["ttft"].reps == len(records["ttft"].params["samples_s"]) == requests
    assert records["inter_token"].reps == requests * (new_tokens - 1)  # every gap between two tokens
    assert len(records["inter_token"].params["samples_s"]) == min(MAX_SAMPLES, requests * (new_tokens - 1))
    for key in ("decode_b1", "prefill_b1"):
        r = records[key]
        assert r.params["tokens_per_s"] > 0 and len(r.params["samples_tokens_per_s"]) == requests
        assert abs(r.median_s * r.params["tokens_per_s"] - 1) < 0.01 and r.params["model"] == model


def test_the_built_in_models_speed_card(tmp_path):
    assert_card(serve_records(tmp_path), "bringup-builtin-llama-2.5m")


def test_a_models_speed_card_with_model(tmp_path):
    make_hf_model(tmp_path / "tiny", "qwen2", tied=True)
    save_tokenizer(tmp_path / "tiny", 320)
    records = serve_records(tmp_path, "--model", str(tmp_path / "tiny"))
    assert_card(records, "tiny")


def test_a_real_trained_models_serving_run():
    """SmolLM2-135M through the same serving run (short: a real model is slow on a small shared CPU)."""
    from bringup.runner.serving_latency import serving_run

    run = serving_run("cpu", None, smollm2_hf_dir(), requests=2, prompt_tokens=32, new_tokens=4)
    assert "smollm2" in run.model.lower() and len(run.ttft_s) == 2 and len(run.inter_token_s) == 2 * 3
    assert all(s > 0 for s in run.ttft_s + run.inter_token_s + run.decode_s)


def test_samples_are_bounded_and_keep_the_runs_shape():
    samples = [float(i) for i in range(1000)]
    kept = bounded(samples)
    assert len(kept) == MAX_SAMPLES and kept[0] == 0.0 and kept[-1] >= 990.0 and kept == sorted(kept)
    assert bounded([0.123456789]) == [0.1234568]


def test_an_unknown_group_is_refused_with_the_list(tmp_path):
    result = run_cli(["bench", "--only", "serving", "--profile", str(tmp_path / "p.yaml")])
    assert result.code == 2 and "serve" in result.stderr
