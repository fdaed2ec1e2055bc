"""BRINGUP_EMU_SPEC parsing: every mistake is one line naming the field; the autoload turns it into exit code 2."""

import json
from importlib.metadata import entry_points

import pytest

from bringup_emu.spec import SpecError, load_spec, parse_size
from tests.emulator.emu_process import run_python

GOOD_DEVICE = {"name": "d", "memory": "1MiB"}


def spec_error(raw: dict) -> str:
    with pytest.raises(SpecError) as caught:
        load_spec(json.dumps(raw))
    return str(caught.value)


@pytest.mark.parametrize(("text", "size"), [(4096, 4096), ("512MiB", 512 << 20), ("8GiB", 8 << 30),
                                            ("1.5 GB", 1_500_000_000), ("64kib", 64 << 10)])
def test_sizes_are_bytes_or_a_number_with_a_unit(text, size) -> None:
    assert parse_size(text, "memory") == size


def test_the_default_spec_is_a_small_slower_integrated_and_a_large_discrete_device() -> None:
    spec = load_spec("default")
    assert [(d.integrated, d.memory_bytes) for d in spec.devices] == [(True, 512 << 20), (False, 8 << 30)]
    assert spec.devices[0].speed < spec.devices[1].speed == 1.0
    assert spec.refused_dtypes == ("float64",)
    assert {"mm", "add", "cat", "_softmax"} <= set(spec.native)
    assert not {"sort", "topk", "rsqrt"} & set(spec.native)


def test_a_spec_file_in_yaml_or_json(tmp_path) -> None:
    (tmp_path / "s.yaml").write_text("devices:\n  - {name: y, integrated: true, memory: 2MiB}\nnative: [mm]\n")
    (tmp_path / "s.json").write_text(json.dumps({"devices": [GOOD_DEVICE], "abort": ["aten::sigmoid"]}))
    assert load_spec(str(tmp_path / "s.yaml")).devices[0].memory_bytes == 2 << 20
    assert load_spec(str(tmp_path / "s.json")).abort == ("sigmoid",)


@pytest.mark.parametrize(("raw", "message"), [
    ({"devices": []}, "devices: must be a non-empty list"),
    ({"devices": [{"name": "d", "memory": "8 gigs"}]}, "devices[0].memory: '8 gigs' is not a size"),
    ({"devices": [{"name": "d"}]}, "devices[0].memory: missing"),
    ({"devices": [GOOD_DEVICE, {"name": "e", "memory": 1, "integrated": "yes"}]},
     "devices[1].integrated: must be true or false"),
    ({"devices": [{**GOOD_DEVICE, "colour": "red"}]}, "devices[0]: unknown field 'colour'"),
    ({"devices": [GOOD_DEVICE], "refused_dtypes": ["float65"]}, "refused_dtypes[0]: 'float65' is not a torch dtype"),
    ({"devices": [GOOD_DEVICE], "native": ["mm", "not_an_op"]}, "native[1]: 'not_an_op' is not an aten operator"),
    ({"devices": [GOOD_DEVICE], "native": ["matmul"]}, "native[0]: aten::matmul never reaches a device's kernels"),
    ({"devices": [GOOD_DEVICE], "native": ["add.Tensor"]}, "name add.out or add"),
    ({"devices": [GOOD_DEVICE], "abort": ["fill_.Scalar"]}, "abort[0]: aten::fill_.Scalar is one of the emulator's"),
    ({"devices": [GOOD_DEVICE], "wrong": {"mm": "double"}}, "wrong['mm']: 'double' is not a number"),
    ({"devices": [GOOD_DEVICE], "natve": []}, "unknown field 'natve'"),
    ({"devices": [{**GOOD_DEVICE, "speed": 0}]}, "devices[0].speed: 0 is not a speed"),
    ({"devices": [{**GOOD_DEVICE, "speed": 2}]}, "devices[0].speed: 2 is more than 1"),
    ({"devices": [{**GOOD_DEVICE, "speed": "fast"}]}, "devices[0].speed: 'fast' is not a number"),
    ({"devices": [{**GOOD_DEVICE, "host_threads": 0}]}, "devices[0].host_threads: 0 is not a thread count"),
    ({"devices": [{**GOOD_DEVICE, "host_threads": 1.5}]}, "devices[0].host_threads: 1.5 is not a thread count"),
    ({"devices": [{**GOOD_DEVICE, "host_threads": True}]}, "devices[0].host_threads: True is not a thread count"),
])
def test_a_mistake_names_its_field(raw: dict, message: str) -> None:
    assert message in spec_error(raw)


def test_a_value_that_is_no_spec_says_what_it_may_be() -> None:
    with pytest.raises(SpecError, match="neither 'default', inline JSON"):
        load_spec("no-such-file.yaml")
    with pytest.raises(SpecError, match="inline JSON is invalid"):
        load_spec("{devices: ]")


def test_a_huge_or_deeply_nested_spec_is_refused_in_one_line(tmp_path) -> None:
    with pytest.raises(SpecError, match="nested too deeply"):
        load_spec('{"devices": ' + "[" * 100_000 + "]" * 100_000 + "}")
    big = tmp_path / "big.json"
    big.write_text(" " * (2 << 20) + "{}")
    with pytest.raises(SpecError, match="a spec is at most"):
        load_spec(str(big))


def _autoload_installed() -> bool:
    return any(ep.value.startswith("bringup_emu.") for ep in entry_points(group="torch.backends"))


@pytest.mark.skipif(not _autoload_installed(), reason="bringup-emu is not installed: no torch.backends entry point")
def test_an_invalid_spec_stops_import_torch_with_one_line_and_exit_code_2() -> None:
    done = run_python("import torch", {"devices": [{"name": "d", "memory": "lots"}]})
    assert done.returncode == 2
    assert done.stderr.startswith("error: BRINGUP_EMU_SPEC: devices[0].memory: 'lots' is not a size")
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not _autoload_installed(), reason="bringup-emu is not installed: no torch.backends entry point")
def test_without_the_variable_import_torch_loads_nothing_of_the_emulator() -> None:
    done = run_python("import sys, torch\nprint(torch._C._get_privateuse1_backend_name(), hasattr(torch, 'emu'),"
                      " 'bringup_emu_C' in sys.modules, 'bringup_emu.spec' in sys.modules)", None)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["privateuseone", "False", "False", "False"]


@pytest.mark.skipif(not _autoload_installed(), reason="bringup-emu is not installed: no torch.backends entry point")
def test_with_the_variable_import_torch_alone_gives_the_device() -> None:
    done = run_python("import torch\nprint(torch.accelerator.current_accelerator(), torch.emu.device_count())",
                      "default")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["emu", "2"]


@pytest.mark.skipif(not _autoload_installed(), reason="bringup-emu is not installed: no torch.backends entry point")
def test_without_a_library_or_a_compiler_import_torch_stops_with_one_line(tmp_path) -> None:
    done = run_python("import torch", "default", extra_env={"CXX": "/no/such/compiler",
                                                             "BRINGUP_EMU_BUILD_DIR": str(tmp_path)})
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: BRINGUP_EMU_SPEC is set but the emulator extension is unavailable: it is not built here and no C++ "
        "compiler is found (set CXX or install g++); run `python -m bringup_emu build` to see the compiler's "
        "output, or unset BRINGUP_EMU_SPEC"]


HOSTILE_SPECS = [
    ('{"devices": [{"name": "d", "memory": 1000000000000000000000000000000}]}', "devices[0].memory", "1 PiB"),
    ('{"devices": [{"name": "d", "memory": "99999999999999999999999TiB"}]}', "devices[0].memory", "1 PiB"),
    ('{"devices": [{"name": "d", "memory": ' + "9" * 5000 + "}]}", "5,000 digits", "holds one that long"),
    ('{"devices": [{"name": "d", "memory": "' + "9" * 5000 + '"}]}', "devices[0].memory", "1 PiB"),
    ('{"devices": [{"name": "d", "memory": 1}], "wrong": {"mm": 1e400}}', "wrong['mm']", "finite"),
    ('{"devices": [{"name": "d", "memory": 1}], "wrong": {"mm": -2}}', "wrong['mm']", "above 0"),
    ('{"devices": [{"name": "' + "n" * 100_000 + '", "memory": 1}]}', "devices[0].name", "at most 256"),
    ('{"devices": [{"name": "a\\u0000b", "memory": 1}]}', "devices[0].name", "NUL"),
    ('{"devices": [{"name": "d", "memory": 1}], "devices": [{"name": "e", "memory": 2}]}', "'devices'",
     "written twice"),
]


@pytest.mark.skipif(not _autoload_installed(), reason="bringup-emu is not installed: no torch.backends entry point")
@pytest.mark.parametrize(("spec", "field", "bound"), HOSTILE_SPECS, ids=[
    "1e30", "huge-TiB", "5000-digit-json", "5000-digit-text", "factor-1e400", "negative-factor", "long-name",
    "nul-name", "duplicate-key"])
def test_a_hostile_spec_stops_import_torch_with_one_line_and_exit_code_2(spec, field, bound) -> None:
    done = run_python("import torch", spec, timeout=30)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: BRINGUP_EMU_SPEC: "), done.stderr[-2000:]
    assert field in lines[0] and bound in lines[0] and len(lines[0]) < 500


def test_a_key_written_twice_in_a_yaml_spec_is_refused(tmp_path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("devices:\n  - {name: a, memory: 1MiB, memory: 2MiB}\n")
    with pytest.raises(SpecError, match="'memory' is written twice"):
        load_spec(str(path))


def test_a_spec_path_that_is_no_regular_file_is_refused(tmp_path) -> None:
    with pytest.raises(SpecError, match="is a directory, not a regular file"):
        load_spec(str(tmp_path))
    with pytest.raises(SpecError, match="is a character device"):
        load_spec("/dev/zero")
