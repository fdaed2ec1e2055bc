import json

from bringup.profiles.diff import diff_profiles
from bringup.profiles.schema import Capabilities, Capability, DeviceSection, EnvironmentSection, Profile
from bringup.profiles.sections.ops import OpCaseRecord
from tests.cli.run_cli import run_cli


def profile(torch_version: str, bf16: str, softmax: str) -> Profile:
    return Profile(
        device=DeviceSection(id="cpu", backend="cpu", name="CPU", memory_free_bytes=1),
        environment=EnvironmentSection(bringup="0.1.0", torch=torch_version, python="3.11", os="Linux",
                                       env={"OMP_NUM_THREADS": "2"}),
        capabilities=Capabilities(dtypes={"bfloat16": Capability(status=bf16)}),  # type: ignore[arg-type]
        ops=[OpCaseRecord(op="softmax", dtype="float32", case="c1", status=softmax)],  # type: ignore[arg-type]
    )


def test_diff_names_versions_capabilities_and_ops():
    before, after = profile("2.12.0", "supported", "pass"), profile("2.13.0", "unsupported", "fail")
    after.device.memory_free_bytes = 2  # volatile: never reported
    changes = {(c.section, c.key): (c.before, c.after) for c in diff_profiles(before, after)}
    assert changes == {
        ("environment", "torch"): ("2.12.0", "2.13.0"),
        ("capabilities", "dtypes.bfloat16"): ("supported", "unsupported"),
        ("ops", "softmax float32 [c1]"): ("pass", "fail"),
    }
    assert diff_profiles(before, before) == []


def test_diff_cli_exit_code(tmp_path):
    from bringup.profiles.store import render_yaml

    a, b, c = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "c.yaml"
    a.write_text(render_yaml(profile("2.12.0", "supported", "pass")))
    b.write_text(render_yaml(profile("2.13.0", "unsupported", "pass")))
    c.write_text(render_yaml(profile("2.13.0", "supported", "pass")))
    assert run_cli(["profile", "diff", str(a), str(b)]).code == 1
    same_caps = run_cli(["profile", "diff", str(a), str(c), "--json"])
    assert same_caps.code == 0 and '"capabilities_differ": false' in same_caps.stdout


def test_diff_between_reference_machines_reads_as_a_summary():
    import re
    from pathlib import Path

    refs = sorted((Path(__file__).resolve().parents[2] / "reference" / "profiles").glob("*.yaml"))[:2]
    result = run_cli(["profile", "diff", str(refs[0]), str(refs[1])])
    assert result.code in (0, 1), result.stderr[-1500:]
    out = result.stdout
    assert re.search(r"bench: \d+ faster, \d+ slower beyond both runs' noise", out)
    assert re.search(r"\d(\.\d+)? (ns|µs|ms|s) ", out)
    assert not re.search(r"0\.000\d{6,}", out)  # no raw seconds with a dozen digits
    moved = len(re.findall(r"x (slower|faster)", out))
    assert 0 < moved <= 12  # the largest moves; --details lists them all
    detailed = run_cli(["profile", "diff", str(refs[0]), str(refs[1]), "--details"]).stdout
    assert len(re.findall(r"x (slower|faster)", detailed)) >= moved
    data = json.loads(run_cli(["profile", "diff", str(refs[0]), str(refs[1]), "--json"]).stdout)
    assert {"changes", "capabilities_differ", "plan"} <= set(data)
