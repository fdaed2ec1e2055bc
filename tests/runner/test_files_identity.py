"""A model's identity from its files (tune's record key): the weights' bytes at both ends and, for GGUF, the tensor
index, not only their names and sizes; 2 MiB read per weight file however large it is."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from bringup.runner.sources import identity as files_identity
from bringup.runner.sources.identity import END_BYTES, directory_sha256, ends_sha256, gguf_sha256

SIZE = 8 * END_BYTES


def weights(path: Path, size: int = SIZE, changed_at: int | None = None) -> Path:
    """A sparse file of `size` zero bytes, with one byte set at `changed_at`."""
    with open(path, "wb") as f:
        f.truncate(size)
        if changed_at is not None:
            f.seek(changed_at)
            f.write(b"\x01")
    return path


def model_dir(path: Path, changed_at: int | None = None) -> Path:
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    weights(path / "model.safetensors", changed_at=changed_at)
    return path


@pytest.mark.parametrize("where", [0, END_BYTES - 1, SIZE - END_BYTES, SIZE - 1],
                         ids=["first byte", "end of the first MiB", "start of the last MiB", "last byte"])
def test_weights_of_the_same_size_with_other_bytes_at_either_end_are_another_model(tmp_path, where):
    same = directory_sha256(model_dir(tmp_path / "a"))
    assert directory_sha256(model_dir(tmp_path / "b")) == same  # the same files: the same identity
    assert directory_sha256(model_dir(tmp_path / "c", changed_at=where)) != same


def test_a_change_in_the_middle_of_a_file_is_not_read(tmp_path):
    """The documented blind spot of reading only the ends: a record holds timings, and replay checks the kernels."""
    middle = SIZE // 2
    assert ends_sha256(weights(tmp_path / "a")) == ends_sha256(weights(tmp_path / "b", changed_at=middle))


def test_a_multi_gigabyte_file_costs_two_mebibytes_of_reading(tmp_path, monkeypatch):
    huge = weights(tmp_path / "huge.safetensors", size=6 << 30, changed_at=(6 << 30) - 1)
    read: list[int] = []
    opened = files_identity.open_regular

    class Counting(io.BufferedReader):
        def read(self, size: int | None = -1) -> bytes:
            chunk = super().read(size)
            read.append(len(chunk))
            return chunk

    def counting(real: Path, label: str) -> io.BufferedReader:
        opened(real, label).close()  # the jail's checks, then the same file, its reads counted
        return Counting(io.FileIO(real))

    monkeypatch.setattr(files_identity, "open_regular", counting)
    assert ends_sha256(huge) != ends_sha256(weights(tmp_path / "zeros", size=6 << 30))
    assert read == [END_BYTES, END_BYTES] * 2


def tensors(**offsets: int) -> dict[str, SimpleNamespace]:
    """gguf ReaderTensor stand-ins: name -> shape, type, offset."""
    return {name: SimpleNamespace(shape=[64, 32], tensor_type=8, data_offset=at) for name, at in offsets.items()}


def test_a_gguf_file_counts_its_tensor_index(tmp_path):
    path = weights(tmp_path / "m.gguf")
    same = gguf_sha256(path, tensors(a=0, b=4096))
    assert gguf_sha256(path, tensors(a=0, b=4096)) == same
    assert gguf_sha256(path, tensors(a=4096, b=0)) != same  # the same bytes, tensors at other offsets
    assert gguf_sha256(path, tensors(a=0, c=4096)) != same  # another name
    other_type = tensors(a=0, b=4096)
    other_type["b"].tensor_type = 2
    assert gguf_sha256(path, other_type) != same


def test_gguf_files_of_the_same_size_with_other_weights_are_another_model(tmp_path):
    from tests.runner.gguf_files import write_gguf
    from tests.runner.hf_fixtures import make_hf_model

    files = []
    for seed in (0, 1):
        folder = tmp_path / f"seed{seed}"
        hf = make_hf_model(folder / "hf", seed=seed)
        files.append(write_gguf(folder / "m.gguf", hf, folder / "hf", "llama"))
    assert files[0].stat().st_size == files[1].stat().st_size
    assert files_identity.model_files_sha256(files[0]) != files_identity.model_files_sha256(files[1])
