"""`bringup eval` end to end through the real CLI on a random-init tiny Llama directory: perplexity against a
direct transformers computation, the float64 reference, a saved reference file read back (exactly the same numbers),
another dtype against it, the profile's eval section, and every refusal in one line."""

from __future__ import annotations

import json
import math

import pytest

from bringup.profiles.store import load_profile
from bringup.runner.eval.text import default_text
from tests.cli.run_cli import CliResult, run_cli
from tests.runner.hf_fixtures import make_hf_model, with_nan_weight
from tests.runner.hf_perplexity import hf_perplexity, load_hf, text_tokens

CTX, STRIDE, TOKENS = "64", "24", "200"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-llama")
    make_hf_model(path, vocab=320, std=0.08)
    return path


@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny):
    """A profile holding the tiny model's tuned plan: every eval of it replays the same plan (weight layout
    included), so two float32 runs compute the same numbers however busy the machine is when they start."""
    folder = tmp_path_factory.mktemp("eval-work")
    tuned = run_cli(["tune", "--model", str(tiny), "--device", "cpu", "--profile", str(folder / "p.yaml"),
                     "--runs", "2"])
    assert tuned.code == 0, tuned.stderr
    return folder


def eval_cli(work, *args: str) -> CliResult:
    return run_cli(["eval", "--device", "cpu", "--profile", str(work / "p.yaml"), *args])


def eval_json(work, *args: str) -> dict:
    result = eval_cli(work, *args, "--json")
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def one_line_error(result: CliResult, *words: str) -> str:
    assert result.code == 2 and "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def saved(tiny, work):
    """float32 against float64, saving its top-k reference."""
    out = work / "ref.safetensors"
    data = eval_json(work, "--model", str(tiny), "--ctx", CTX, "--stride", STRIDE, "--max-tokens", TOKENS,
                     "--reference", "float64", "--save-reference", str(out))
    return data, out


def test_perplexity_matches_transformers_over_the_same_windows(tiny, saved):
    data, _ = saved
    tokens = text_tokens(tiny, default_text().text, int(TOKENS))
    expected = hf_perplexity(load_hf(tiny), tokens, int(CTX), int(STRIDE))
    assert data["tokens"] == int(TOKENS) and data["scored"] == int(TOKENS) - 1
    assert data["windows"] == math.ceil((int(TOKENS) - int(CTX)) / int(STRIDE)) + 1
    assert abs(data["ppl"] / expected - 1) < 1e-3, (data["ppl"], expected)
    assert data["ppl"] == pytest.approx(math.exp(data["nll"])) and 0 < data["se"] < data["nll"]
    assert data["tokens_per_s"] > 0


def test_float64_reference_agrees_in_float32(saved):
    reference = saved[0]["reference"]
    assert reference["exact"] is True and reference["source"] == "float64"
    assert reference["kld_mean"] < 1e-6 and reference["kld_max"] < 1e-5
    assert reference["top1_agreement"] == 1.0
    assert abs(reference["delta_ppl"]) < 1e-3 * reference["reference_ppl"]


def test_saved_reference_read_back_gives_exactly_the_same_numbers(tiny, work, saved):
    first, out = saved
    again = eval_json(work, "--model", str(tiny), "--reference", str(out))  # its ctx, stride and token count
    assert (again["ctx"], again["stride"], again["tokens"]) == (int(CTX), int(STRIDE), int(TOKENS))
    reference = again["reference"]
    assert reference["exact"] is False and reference["k"] == 32
    assert reference["kld_mean"] == 0.0 and reference["kld_max"] == 0.0 and reference["top1_agreement"] == 1.0
    assert reference["delta_ppl"] == 0.0 and again["ppl"] == first["ppl"]
    assert 0 < reference["rest_mass_mean"] < 1


def test_bfloat16_against_the_float32_reference_reports_a_divergence(tiny, work, saved):
    _, out = saved
    result = eval_cli(work, "--model", str(tiny), "--reference", str(out), "--dtype", "bfloat16")
    assert result.code == 0, result.stderr
    for figure in ("KLD mean (lower bound)", "KLD p99", "top-1 agreement", "Δ perplexity", "reference perplexity",
                   "bfloat16", "lower bound of the full KL divergence"):
        assert figure in result.stdout
    entries = load_profile(work / "p.yaml").eval
    bf16 = next(e for e in entries.values() if e.dtype == "bfloat16")
    assert bf16.reference is not None and bf16.reference.kld_mean > 0 and bf16.reference.reference_dtype == "float32"
    assert 0 < bf16.reference.top1_agreement <= 1 and bf16.reference.delta_ppl != 0


def test_profile_keeps_one_entry_per_model_and_dtype(work, saved):
    entries = load_profile(work / "p.yaml").eval
    assert entries and all(key.startswith(f"{e.model} [") for key, e in entries.items())
    f32 = [e for e in entries.values() if e.dtype == "float32"]
    assert len(f32) == 1 and f32[0].ctx == int(CTX)  # the rerun replaced its own entry
    assert load_profile(work / "p.yaml").stages["eval"].status == "complete"


def test_another_text_is_refused_in_one_line(tiny, work, saved, tmp_path):
    other = tmp_path / "other.txt"
    other.write_text("the quick brown fox jumps over the lazy dog " * 40)
    one_line_error(eval_cli(work, "--model", str(tiny), "--text", str(other), "--reference", str(saved[1])),
                   "another text", "--text")


def test_another_tokenizer_is_refused_in_one_line(work, saved, tmp_path):
    other = tmp_path / "other-model"
    make_hf_model(other, vocab=300)
    one_line_error(eval_cli(work, "--model", str(other), "--reference", str(saved[1])), "another tokenizer")


def test_windows_other_than_the_reference_are_refused(tiny, work, saved):
    one_line_error(eval_cli(work, "--model", str(tiny), "--reference", str(saved[1]), "--ctx", "32"),
                   "--ctx 32", f"reference's {CTX}")
    one_line_error(eval_cli(work, "--model", str(tiny), "--reference", str(saved[1]), "--max-tokens", "100"),
                   "--max-tokens 100")


def test_bad_input_ends_in_one_line(tiny, work, tmp_path):
    not_reference = tmp_path / "x.safetensors"
    not_reference.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    one_line_error(eval_cli(work, "--model", str(tiny), "--reference", str(not_reference)), "not a bringup eval")
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"garbage")
    one_line_error(eval_cli(work, "--model", str(tiny), "--reference", str(garbage)), "not a safetensors file")
    one_line_error(eval_cli(work, "--model", str(tiny), "--reference", str(tmp_path / "absent")), "does not exist")
    one_line_error(eval_cli(work, "--model", str(tiny), "--ctx", "16", "--stride", "16"), "--stride 16")
    one_line_error(eval_cli(work, "--model", str(tiny), "--text", str(tmp_path / "absent.txt")), "--text")
    one_line_error(eval_cli(work, "--model", str(tiny), "--save-reference", str(tmp_path / "no" / "r.st")),
                   "does not exist")
    assert not (tmp_path / "no").exists()


def test_the_reference_read_is_never_the_one_written(tiny, work, saved, tmp_path):
    _, out = saved
    before = out.read_bytes()
    link = tmp_path / "link.safetensors"
    link.symlink_to(out)
    for target in (out, link):  # the file itself, or a link to it
        one_line_error(eval_cli(work, "--model", str(tiny), "--reference", str(out), "--save-reference", str(target)),
                       "is a file this run reads")
    one_line_error(eval_cli(work, "--model", str(tiny), "--save-reference", str(work / "p.yaml")),
                   "is a file this run reads")
    assert out.read_bytes() == before and link.is_symlink()


def test_report_and_profile_diff_show_the_evals(tiny, work, saved, tmp_path):
    markdown = run_cli(["report", "-p", str(work / "p.yaml"), "--format", "md", "-o", "-"])
    assert markdown.code == 0, markdown.stderr
    assert "### Model evals" in markdown.stdout and "KLD mean / p99 / max" in markdown.stdout
    page = tmp_path / "report.html"
    html = run_cli(["report", "-p", str(work / "p.yaml"), "-o", str(page)])
    assert html.code == 0, html.stderr
    text = page.read_text()
    assert 'id="evals-table"' in text and f"{saved[0]['ppl']:.5g}" in text and 'href="#evals"' in text

    before = tmp_path / "before.yaml"
    assert eval_cli(work, "--model", str(tiny), "--ctx", "32", "--stride", "16", "--max-tokens", "64",
                    "--profile", str(before)).code == 0  # the later --profile wins over eval_cli's
    diff = run_cli(["profile", "diff", str(before), str(work / "p.yaml"), "--json"])
    assert diff.code == 0, diff.stderr
    evals = [c for c in json.loads(diff.stdout)["changes"] if c["section"] == "eval"]
    assert len(evals) >= 2 and any(c["before"] is None and "KLD" in c["after"] for c in evals)
    shown = run_cli(["profile", "diff", str(before), str(work / "p.yaml")])
    assert shown.code == 0 and "model evals" in shown.stdout


def test_non_finite_scores_are_a_finding_not_a_figure(work, tmp_path):
    broken = tmp_path / "nan-model"
    make_hf_model(broken, vocab=320)
    with_nan_weight(broken)
    profile = tmp_path / "p.yaml"
    result = run_cli(["eval", "--device", "cpu", "--profile", str(profile), "--model", str(broken), "--force",
                      "--ctx", CTX, "--stride", STRIDE, "--max-tokens", "80"])
    assert result.code == 1 and "Traceback" not in result.stderr
    assert "non-finite log-probability to token 1 " in result.stderr
    assert not profile.exists() or load_profile(profile).eval is None
