"""The report's and `profile show`'s "deploy with" section: what `bringup export` derives, per engine, from the same
profile — the command, each setting with its reason, the flags left out."""

from __future__ import annotations

from pathlib import Path

from bringup.profiles.schema import Capability, Profile
from bringup.profiles.store import load_profile, render_yaml
from bringup.report.html import render_html
from bringup.report.markdown import render_markdown
from bringup.report.model import build_report
from bringup.report.sections.deploy import deploy_views
from tests.cli.run_cli import run_cli
from tests.report.sample import REFERENCE_PROFILES

EPYC = REFERENCE_PROFILES / "cpu-amd-epyc-2core-avx512-bf16.yaml"


def epyc() -> Profile:
    return load_profile(EPYC)


def without_bfloat16_and_compile(profile: Profile) -> Profile:
    profile.capabilities.dtypes["bfloat16"] = Capability(status="unsupported", reason="injected: wrong values")
    for record in profile.compiled:
        record.status = "compile_error"
    return profile


def test_each_engine_gets_the_command_export_gives():
    views = {v.engine: v for v in deploy_views(epyc())}
    assert set(views) == {"vllm", "llama.cpp"}
    vllm, llama = views["vllm"], views["llama.cpp"]
    assert "vllm.entrypoints.openai.api_server" in vllm.command and "--dtype bfloat16" in vllm.command
    assert llama.command.startswith("llama-server -m ") and "-t 2" in llama.command
    assert all(r.reason for r in vllm.rows + llama.rows)
    assert any(r.value == "left out" for r in vllm.rows)  # an untuned profile: no plan sizes


def test_negative_evidence_changes_what_the_section_shows():
    views = {v.engine: v for v in deploy_views(without_bfloat16_and_compile(epyc()))}
    command = views["vllm"].command
    assert "--enforce-eager" in command and "--dtype bfloat16" not in command
    assert "--dtype float32" in command or "--dtype float16" in command


def test_markdown_and_html_show_it():
    report = build_report(epyc(), "p.yaml")
    text = render_markdown(report)
    assert "### Deploy with" in text and "--dtype bfloat16" in text and "left out:" in text
    page = render_html(report)
    assert 'id="deploy"' in page and 'id="deploy-vllm"' in page and 'id="deploy-llama-cpp"' in page
    assert 'class="left-out"' in page


def test_a_profile_without_a_device_has_nothing_to_deploy():
    report = build_report(Profile(), "p.yaml")
    assert report.deploy == []
    assert "### Deploy with" not in render_markdown(report)
    assert "deploy: not measured" in render_html(report)


def test_profile_show_prints_it(tmp_path: Path):
    path = tmp_path / "p.yaml"
    path.write_text(render_yaml(without_bfloat16_and_compile(epyc())))
    result = run_cli(["profile", "show", str(path)])
    assert result.code == 0, result.stderr
    flat = " ".join(result.stdout.split())
    assert "deploy with vllm" in flat and "deploy with llama.cpp" in flat
    assert "--enforce-eager" in flat and "`bringup export --engine vllm` says why" in flat
