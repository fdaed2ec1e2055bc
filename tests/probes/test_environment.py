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
