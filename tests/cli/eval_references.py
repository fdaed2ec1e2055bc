"""Eval reference files rewritten for tests: a file saved by `bringup eval --save-reference` with its header or
its tensors changed, the rest (its hashes included) kept."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from bringup.runner.eval.reference_file import METADATA_KEY

Tensors = dict[str, torch.Tensor]


def read_reference(path: Path) -> tuple[dict[str, Any], Tensors]:
    with safe_open(str(path), framework="pt") as f:
        return json.loads(f.metadata()[METADATA_KEY]), {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118


def poisoned(saved: Path, folder: Path, header: Callable[[dict], str | dict] | None = None,
             tensors: Callable[[Tensors], Tensors] | None = None, name: str = "poisoned.safetensors") -> Path:
    """`saved` with its header (changed to a dict, or to raw JSON text) and its tensors rewritten, in `folder`."""
    fields, arrays = read_reference(saved)
    text = header(dict(fields)) if header else fields
    out = folder / name
    save_file(tensors(arrays) if tensors else arrays, str(out),
              metadata={METADATA_KEY: text if isinstance(text, str) else json.dumps(text)})
    return out
