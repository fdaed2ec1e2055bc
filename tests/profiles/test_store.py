import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from bringup.backends.base import DeviceInfo
from bringup.errors import BringupError
from bringup.profiles.schema import Capabilities, Capability, Profile
from bringup.profiles.store import load_profile, load_profile_or_none, update_profile

CPU = DeviceInfo(id="cpu", backend="cpu", name="Test CPU", vendor="x", memory_total_bytes=1 << 30)
OTHER = DeviceInfo(id="cuda:0", backend="cuda", name="Other GPU", uuid="GPU-1")


def add_capability(name: str, status: str = "supported"):
    def mutate(p: Profile) -> None:
        p.capabilities = p.capabilities or Capabilities()
        p.capabilities.dtypes[name] = Capability(status=status, evidence="test")  # type: ignore[arg-type]

    return mutate


def test_round_trip_and_stage_stamp(tmp_path):
    path = tmp_path / "p.yaml"
    update_profile(path, CPU, add_capability("float32"), stage="probe", status="complete")
    loaded = load_profile(path)
    assert loaded.device.id == "cpu" and loaded.capabilities.dtypes["float32"].status == "supported"
    assert loaded.stages["probe"].status == "complete" and loaded.stages["probe"].bringup
    assert yaml.safe_load(path.read_text())["schema"] == "bringup.profile/v1"
    assert not list(tmp_path.glob(".p.yaml.*.tmp"))


def test_stage_replaces_only_its_section(tmp_path):
    path = tmp_path / "p.yaml"
    update_profile(path, CPU, add_capability("float32"), stage="probe", status="complete")
    update_profile(path, CPU, lambda p: None, stage="devices", status="complete")
    loaded = load_profile(path)
    assert set(loaded.stages) == {"probe", "devices"}
    assert loaded.capabilities.dtypes["float32"].status == "supported"


def test_profile_for_another_device_is_refused_unless_forced(tmp_path):
    path = tmp_path / "p.yaml"
    update_profile(path, OTHER, add_capability("float16"), stage="probe", status="complete")
    with pytest.raises(BringupError, match=r"recorded for cuda:0 \(Other GPU\), not cpu .*--force"):
        update_profile(path, CPU, add_capability("float32"), stage="probe", status="complete")
    assert load_profile(path).device.id == "cuda:0"
    update_profile(path, CPU, add_capability("float32"), stage="probe", status="complete", force=True)
    forced = load_profile(path)
    assert forced.device.id == "cpu" and "float16" not in forced.capabilities.dtypes


def test_unknown_schema_version_is_refused(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("schema: bringup.profile/v9\n")
    with pytest.raises(BringupError, match=r"schema 'bringup.profile/v9'.*--force"):
        load_profile(path)
    with pytest.raises(BringupError):
        update_profile(path, CPU, lambda p: None, stage="probe", status="complete")
    update_profile(path, CPU, lambda p: None, stage="probe", status="complete", force=True)
    assert load_profile(path).schema_version == "bringup.profile/v1"


def test_wrong_types_name_the_field(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("schema: bringup.profile/v1\ndevice: {id: cpu, backend: cpu, name: x, memory_total_bytes: lots}\n")
    with pytest.raises(BringupError) as info:
        load_profile(path)
    message = str(info.value)
    assert "field device.memory_total_bytes" in message and str(path) in message and "\n" not in message


def test_malformed_yaml(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("schema: [unclosed\n")
    with pytest.raises(BringupError, match="not valid YAML at line"):
        load_profile(path)


def test_yaml_is_loaded_safely(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("schema: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(BringupError, match="not valid YAML"):
        load_profile(path)


def test_unwritable_path(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(BringupError, match=r"cannot write profile .*choose a writable --profile path"):
        update_profile(blocker / "p.yaml", CPU, lambda p: None, stage="probe", status="complete")


def test_failed_mutation_leaves_the_old_profile(tmp_path):
    path = tmp_path / "p.yaml"
    update_profile(path, CPU, add_capability("float32"), stage="probe", status="complete")
    before = path.read_bytes()

    def interrupted(p: Profile) -> None:
        add_capability("bfloat16")(p)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        update_profile(path, CPU, interrupted, stage="probe", status="complete")
    assert path.read_bytes() == before


def test_invalid_mutation_is_not_written(tmp_path):
    path = tmp_path / "p.yaml"
    update_profile(path, CPU, add_capability("float32"), stage="probe", status="complete")
    before = path.read_bytes()

    def corrupt(p: Profile) -> None:
        p.capabilities.dtypes["float32"].status = "maybe"  # type: ignore[assignment]

    with pytest.raises(Exception):  # noqa: B017 - pydantic's error type; the point is the file
        update_profile(path, CPU, corrupt, stage="probe", status="complete")
    assert path.read_bytes() == before


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from bringup.backends.base import DeviceInfo
    from bringup.profiles.schema import Capabilities, Capability
    from bringup.profiles.store import update_profile
    cpu = DeviceInfo(id="cpu", backend="cpu", name="Test CPU")
    def big(p):
        p.capabilities = Capabilities(dtypes={f"d{i}": Capability(status="unknown", reason="x" * 200)
                                              for i in range(20000)})
    print("ready", flush=True)
    while True:
        update_profile(Path(sys.argv[1]), cpu, big, stage="probe", status="partial")
    """
)


def test_killed_writer_never_corrupts_the_profile(tmp_path):
    path = tmp_path / "p.yaml"
    update_profile(path, CPU, add_capability("float32"), stage="probe", status="complete")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for delay in (0.3, 0.9, 1.7):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, env=env)
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        profile = load_profile(path)  # must parse: either the old profile or a complete new one
        assert profile.device.id == "cpu"
    (tmp_path / "p.yaml.lock").unlink(missing_ok=True)
    assert load_profile_or_none(tmp_path / "absent.yaml") is None
