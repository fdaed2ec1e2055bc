"""One device record: what a backend reports is what a profile's `device` section holds (no second field list)."""

from pathlib import Path

import pytest
import yaml

from bringup.backends.cpu import CpuBackend
from bringup.backends.device_info import DeviceInfo
from bringup.profiles.schema import DeviceSection, Profile
from bringup.profiles.store import load_profile, render_yaml

REFERENCE = sorted((Path(__file__).resolve().parents[2] / "reference" / "profiles").glob("*.yaml"))


def test_the_profile_section_is_the_backend_record():
    assert DeviceSection is DeviceInfo
    assert Profile.model_fields["device"].annotation == DeviceInfo | None


@pytest.mark.parametrize("path", REFERENCE, ids=lambda p: p.name)
def test_reference_profiles_load_and_write_their_device_section_unchanged(path):
    profile = load_profile(path)
    assert isinstance(profile.device, DeviceInfo)
    assert profile.device.id == ("cuda:0" if path.name.startswith("nvidia-") else "cpu")
    written = yaml.safe_load(render_yaml(profile))["device"]
    recorded = yaml.safe_load(path.read_text())["device"]
    assert list(written.items()) == list(recorded.items())  # same keys, same order, same values


def test_a_backend_record_round_trips_through_a_profile(tmp_path):
    info = CpuBackend().device_info(0)
    path = tmp_path / "p.yaml"
    path.write_text(render_yaml(Profile(device=info)))
    assert load_profile(path).device == info


def test_unknown_device_fields_are_refused():
    with pytest.raises(ValueError, match="colour"):
        DeviceInfo.model_validate({"id": "cpu", "backend": "cpu", "name": "x", "colour": "red"})
