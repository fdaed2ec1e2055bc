from bringup.probes.environment import collect_environment, recorded_env


def test_relevant_variables_recorded_and_secrets_never():
    env = {
        "CUDA_VISIBLE_DEVICES": "1",
        "OMP_NUM_THREADS": "2",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "HF_TOKEN": "hf_secret",
        "TORCH_API_KEY": "k",
        "NCCL_PASSWORD": "p",
        "HOME": "/root",
    }
    kept = recorded_env(env)
    assert kept == {"CUDA_VISIBLE_DEVICES": "1", "OMP_NUM_THREADS": "2",
                    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}


def test_environment_section_has_versions():
    import torch

    env = collect_environment({"OMP_NUM_THREADS": "2"})
    assert env.torch == torch.__version__ and env.python and env.os
    assert env.runtime["cpu_capability"] and env.env == {"OMP_NUM_THREADS": "2"}


def test_profiles_recorded_before_env_still_load():
    from pathlib import Path

    from bringup.probes.env_facts.report import report_sections
    from bringup.profiles.store import load_profile

    references = sorted((Path(__file__).parents[2] / "reference" / "profiles").glob("*.yaml"))
    recorded_before = [path for path in references if "torch_build:" not in path.read_text()]
    assert recorded_before
    for path in recorded_before:
        environment = load_profile(path).environment
        assert environment is not None and environment.torch_build == {} and environment.system == {}
        sections = report_sections(environment)
        assert sections["system"]["os"] == environment.os and sections["torch"]["version"] == environment.torch
