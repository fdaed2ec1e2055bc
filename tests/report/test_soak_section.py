"""A soak recorded in the profile appears in the report, its findings included."""

from __future__ import annotations

import torch

from bringup.probes.soak import run_soak
from bringup.profiles.schema import DeviceSection, Profile
from bringup.profiles.sections.soak import SoakDtype
from bringup.profiles.store import render_yaml
from bringup.report.write import render_report


def test_the_soak_and_its_findings_are_in_the_html_and_the_markdown(tmp_path):
    section = run_soak(torch.device("cpu"), [torch.float32], seconds=0.0, n=32, min_rounds=5)
    drifted = SoakDtype(dtype="bfloat16", rounds=5, first_tflops=1.0, last_tflops=0.5, min_tflops=0.5,
                        max_tflops=1.0, ratio=0.5, wrong_rounds=[3])
    section = section.model_copy(update={"dtypes": [*section.dtypes, drifted], "status": "fail",
                                         "findings": ["bfloat16: intermittent wrong results in 1 of 5 rounds"]})
    path = tmp_path / "p.yaml"
    path.write_text(render_yaml(Profile(device=DeviceSection(id="cpu", backend="cpu", name="test"), soak=section)))
    html = render_report(path)
    assert 'id="soak-table"' in html and "wrong in rounds 3" in html and "right every round" in html
    assert "intermittent wrong results in 1 of 5 rounds" in html
    markdown = render_report(path, fmt="md")
    assert "- soak: fail" in markdown and "intermittent wrong results" in markdown
