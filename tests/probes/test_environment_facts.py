"""The environment probes: bounded tools, parsers on fixture text, and a report that survives broken probes."""

import shutil
import time

import pytest

from bringup.probes import environment
from bringup.probes.env_facts.accelerators import accelerator_facts, legacy_driver
from bringup.probes.env_facts.compilers import compiler_facts
from bringup.probes.env_facts.host import cgroup_cpu_quota, cpu_facts, isa_features
from bringup.probes.env_facts.packages import NOT_INSTALLED, PACKAGES, installed_version, package_facts
from bringup.probes.env_facts.report import SECTION_ORDER, report_sections
from bringup.probes.env_facts.tools import run_tool
from bringup.probes.env_facts.torch_build import config_facts, library_versions
from tests.probes.env_fakes import HANGING, fake_tool, first_on_path

needs_sh = pytest.mark.skipif(shutil.which("sh") is None, reason="fake tools are /bin/sh scripts")

CONFIG = """PyTorch built with:
  - GCC 13.3
  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for Intel(R) 64 architecture
  - Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71049cd69a3df32adcccb623b12cd7baa22)
  - OpenMP 201511 (a.k.a. OpenMP 4.5)
  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, CXX_COMPILER=/usr/bin/c++, CXX_FLAGS= -O2 -DX=1, \
USE_CUDA=0, USE_MKL=ON, USE_NCCL=OFF, USE_OPENMP=ON, USE_ROCM=OFF,
"""
X86_CPUINFO = "processor\t: 0\nmodel name\t: Some Xeon\nflags\t\t: fpu sse4_2 avx avx2 avx512f amx_tile\n\n" \
              "processor\t: 1\nmodel name\t: Some Xeon\nflags\t\t: fpu sse4_2 avx avx2 avx512f amx_tile\n"
ARM_CPUINFO = "processor\t: 0\nFeatures\t: fp asimd asimddp sve bf16\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"


@needs_sh
def test_hanging_tool_is_cut_off_with_its_children(tmp_path, monkeypatch):
    first_on_path(monkeypatch, tmp_path / "bin")
    fake_tool(tmp_path / "bin", "slowtool", HANGING)
    start = time.monotonic()
    result = run_tool(["slowtool"], timeout=0.5)
    assert time.monotonic() - start < 5
    assert not result.ok and result.reason == "timed out after 0.5 s"


@needs_sh
def test_failing_tool_reports_exit_code_and_first_error_line(tmp_path, monkeypatch):
    first_on_path(monkeypatch, tmp_path / "bin")
    fake_tool(tmp_path / "bin", "badtool", "echo 'boom: no device' >&2\necho second >&2\nexit 3")
    result = run_tool(["badtool", "--version"])
    assert not result.ok and result.reason == "exit 3: boom: no device"


def test_missing_tool_is_not_found():
    assert run_tool(["bringup-no-such-tool-here"]).reason == "not found"


@needs_sh
def test_nvidia_smi_lines_and_driver_files(tmp_path, monkeypatch):
    first_on_path(monkeypatch, tmp_path / "bin")
    header = "| NVIDIA-SMI 550.54  Driver Version: 550.54  CUDA Version: 12.4 |"
    rows = "echo '0, GPU A, 550.54, 00000000:01:00.0, 81559 MiB'; echo '1, GPU A, 550.54, 00000000:02:00.0, 81559 MiB'"
    fake_tool(tmp_path / "bin", "nvidia-smi", f"if [ -z \"$1\" ]; then echo '{header}'; else {rows}; fi")
    root = tmp_path / "root"
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "proc/driver/nvidia/version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54\n")
    (root / "sys/module/nvidia").mkdir(parents=True)
    facts = accelerator_facts(root, timeout=3)
    assert facts["nvidia-smi[0]"] == "0, GPU A, 550.54, 00000000:01:00.0, 81559 MiB"
    assert facts["nvidia-smi[1]"].startswith("1, GPU A")
    assert facts["nvidia_driver_cuda"] == "12.4"
    assert facts["driver_nvidia"].endswith("Kernel Module 550.54")
    assert facts["kernel_modules"] == "nvidia"
    assert legacy_driver(facts) == "nvidia: " + facts["driver_nvidia"]


@needs_sh
def test_hanging_smi_tools_are_reported_and_bounded_together(tmp_path, monkeypatch):
    first_on_path(monkeypatch, tmp_path / "bin")
    for name in ("nvidia-smi", "rocm-smi", "xpu-smi"):
        fake_tool(tmp_path / "bin", name, HANGING)
    start = time.monotonic()
    facts = accelerator_facts(tmp_path / "empty-root", timeout=0.5)
    assert time.monotonic() - start < 5
    assert facts["nvidia-smi"] == facts["rocm-smi"] == facts["xpu-smi"] == "timed out after 0.5 s"


@needs_sh
def test_failing_compiler_and_cxx_in_use(tmp_path, monkeypatch):
    first_on_path(monkeypatch, tmp_path / "bin")
    fake_tool(tmp_path / "bin", "gcc", "echo 'gcc: licence expired' >&2; exit 1")
    fake_tool(tmp_path / "bin", "mycxx", "echo 'mycxx 9.9.9'")
    facts = compiler_facts({"CXX": "mycxx -O2"}, timeout=3)
    assert facts["gcc"] == "exit 1: gcc: licence expired"
    assert facts["cxx_in_use"] == "mycxx (CXX=mycxx -O2): mycxx 9.9.9"


def test_torch_config_essentials_parsed():
    facts = config_facts(CONFIG)
    assert facts["build_type"] == "Release" and facts["blas"] == "mkl" and facts["cxx_compiler"] == "/usr/bin/c++"
    assert facts["built_with"] == "GCC 13.3" and facts["enabled_features"] == "MKL OPENMP"
    assert library_versions(CONFIG) == {"onednn_version": "v3.12.0", "mkl_version": "2024.2", "openmp_version": "4.5"}
    assert config_facts("") == {}


def test_isa_features_x86_and_arm():
    present, absent = isa_features(X86_CPUINFO)
    assert present == ["sse4_2", "avx", "avx2", "avx512f", "amx_tile"] and "avx512_bf16" in absent
    present, absent = isa_features(ARM_CPUINFO)
    assert present == ["asimd", "asimddp", "bf16", "sve"] and "sve2" in absent
    assert isa_features("") == ([], [])


def test_cpu_facts_from_fixture_root(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text(ARM_CPUINFO)
    (tmp_path / "sys/fs/cgroup").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/cpu.max").write_text("250000 100000\n")
    facts = cpu_facts(tmp_path)
    assert facts["model"] == "implementer 0x41, part 0xd0c"
    assert facts["isa_features"] == "asimd asimddp bf16 sve"
    assert facts["cores"].endswith("cgroup quota 2.5 CPUs")
    assert cgroup_cpu_quota(tmp_path / "nowhere") is None


def test_packages_all_named_from_metadata():
    facts = package_facts()
    assert set(PACKAGES) <= set(facts)
    assert facts["torch"] != NOT_INSTALLED and all(isinstance(v, str) and v for v in facts.values())
    assert installed_version("bringup-no-such-distribution") is None


def test_a_broken_probe_leaves_a_reason_not_a_crash(monkeypatch):
    def broken() -> dict[str, str]:
        raise RuntimeError("metadata database is corrupt\nsecond line")

    monkeypatch.setattr(environment, "package_facts", broken)
    env = environment.collect_environment({}, timeout=2)
    assert env.packages == {"error": "error: RuntimeError: metadata database is corrupt second line"}
    assert env.torch_build and env.cpu and env.system and env.compilers and env.accelerators


def test_report_sections_in_order_and_flat_text():
    env = environment.collect_environment({"CUDA_VISIBLE_DEVICES": "1"}, timeout=2)
    sections = report_sections(env, environment.KEY_VARIABLES)
    assert tuple(sections) == SECTION_ORDER
    assert sections["variables"]["CUDA_VISIBLE_DEVICES"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in sections["variables"]["not_set"].split()
    for facts in sections.values():
        assert all(isinstance(v, str) and "\n" not in v for v in facts.values())
