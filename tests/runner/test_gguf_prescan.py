"""The GGUF pre-scan (runner/sources/gguf/prescan.py, tensor_index.py): a file gguf's own writer made reads exactly as
gguf's own reader reads it; every count, length and offset that claims more than the file holds, or more than a
cap, is refused in one line before anything is built; tensors outside the data section, wrapping around, unaligned
or sharing bytes are refused by name."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from bringup.errors import BringupError
from bringup.runner.sources.gguf.prescan import MAX_ARRAY, MAX_ARRAY_ITEMS, MAX_KEYS, MAX_VOCABULARY
from bringup.runner.sources.gguf.reader import open_gguf
from tests.runner.gguf_bytes import (
    ARRAY,
    F32,
    Q8_0,
    STRING,
    UINT8,
    UINT32,
    array,
    gguf_bytes,
    kv,
    tensor_info,
    write,
)

gguf = pytest.importorskip("gguf", reason="the reference reader and writer are the gguf package's")
NAME = [kv("general.name", STRING, "m")]


def refused(path: Path, *words: str) -> str:
    with pytest.raises(BringupError) as caught:
        open_gguf(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    for word in words:
        assert word in message, message
    return message


@pytest.fixture()
def written(tmp_path: Path) -> Path:
    """A file of gguf's own writer: every value type, arrays of numbers, bools and strings, five tensor types."""
    writer = gguf.GGUFWriter(str(tmp_path / "w.gguf"), "llama")
    writer.add_uint8("k.u8", 200)
    writer.add_int16("k.i16", -7)
    writer.add_uint64("k.u64", 2**63 + 5)
    writer.add_float32("k.f32", 0.1)
    writer.add_float64("k.f64", -2.5)
    writer.add_bool("k.bool", True)
    writer.add_string("k.text", "héllo \x1b")
    writer.add_array("k.ints", [1, 2, 3])
    writer.add_array("k.floats", [0.5, -1.0])
    writer.add_array("k.bools", [True, False])
    writer.add_array("k.texts", ["a", "", "ĠHello"])
    rng = np.random.default_rng(0)
    values = rng.standard_normal((4, 64)).astype(np.float32)
    writer.add_tensor("f32", values)
    writer.add_tensor("f16", values.astype(np.float16))
    for kind in (gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_1, gguf.GGMLQuantizationType.BF16):
        writer.add_tensor(kind.name, gguf.quants.quantize(values, kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tmp_path / "w.gguf"


def test_a_written_file_reads_as_ggufs_own_reader_reads_it(written):
    ours, theirs = open_gguf(written), gguf.GGUFReader(str(written))
    assert ours.metadata == {k: f.contents() for k, f in theirs.fields.items() if not k.startswith("GGUF.")}
    assert ours.metadata["k.texts"] == ["a", "", "ĠHello"] and ours.metadata["k.bools"] == [True, False]
    assert [t.name for t in theirs.tensors] == list(ours.tensors)
    for reference in theirs.tensors:
        tensor = ours.tensors[reference.name]
        assert (tensor.tensor_type, tensor.shape, tensor.n_bytes, tensor.data_offset) == \
            (reference.tensor_type, tuple(reference.shape.tolist()), reference.n_bytes, reference.data_offset)
        assert tensor.data.dtype == reference.data.dtype and tensor.data.shape == reference.data.shape
        assert np.array_equal(tensor.data.view(np.uint8), reference.data.view(np.uint8))
        assert not tensor.data.flags.writeable


U64 = struct.Struct("<Q").pack


@pytest.mark.parametrize(("entries", "words"), [
    ([kv("k", ARRAY, array(UINT8, 60_000, bytes(100)))], ("'k'", "60000 bytes", "truncated or corrupt")),
    ([kv("tokenizer.t", ARRAY, array(UINT32, 10**6, bytes(100)))], ("'tokenizer.t'", "4000000 bytes")),
    ([kv("tokenizer.t", ARRAY, array(STRING, 10**6, bytes(64)))], ("'tokenizer.t'", "1,000,000 strings")),
    ([kv("k", ARRAY, array(STRING, 2, U64(0) + U64(2**40)))], ("string 1 of", "'k'", "1099511627776 bytes")),
    ([kv("k", STRING, U64(2**62))], ("'k'", "4611686018427387904 bytes", "more than the 16777216")),
    ([U64(2**40)], ("metadata key 1", "more than the 65535")),
])
def test_claims_beyond_the_file_or_a_string_cap_are_refused_before_reading(tmp_path, entries, words):
    refused(write(tmp_path / "c.gguf", NAME + entries), *words)


def test_counts_in_the_fixed_header_are_checked_against_the_bytes_and_the_caps(tmp_path):
    def header(tensors: int, keys: int) -> bytes:
        return b"GGUF" + struct.pack("<IQQ", 3, tensors, keys) + bytes(200)

    for tensors, keys, words in [(0, MAX_KEYS + 1, ("65,537 metadata keys", "more than the 65,536")),
                                 (0, 1000, ("1,000 metadata keys claimed",)),
                                 (10**6, 0, ("1,000,000 tensors claimed", "65,536")),
                                 (1000, 0, ("1,000 tensors claimed", "bytes left"))]:
        path = tmp_path / "h.gguf"
        path.write_bytes(header(tensors, keys))
        refused(path, *words)


@pytest.mark.parametrize(("key", "count", "words"), [
    ("general.tags", MAX_ARRAY + 1, ("'general.tags' claims 65,537 items", "65,536 any other metadata array")),
    ("tokenizer.ggml.tokens", MAX_VOCABULARY + 1, ("1,048,577 items", "1,048,576 a tokenizer array")),
    ("general.junk", 10**9, ("1,000,000,000 items",)),
])
def test_an_array_longer_than_its_cap_is_refused_from_its_count_alone(tmp_path, key, count, words):
    refused(write(tmp_path / "a.gguf", [*NAME, kv(key, ARRAY, array(STRING, count))]), *words, "re-convert it")


def test_all_arrays_together_have_a_cap(tmp_path):
    full = [kv(f"tokenizer.a{i}", ARRAY, array(UINT8, MAX_VOCABULARY, bytes(MAX_VOCABULARY))) for i in range(4)]
    assert 4 * MAX_VOCABULARY == MAX_ARRAY_ITEMS
    one_more = kv("tokenizer.b", ARRAY, array(UINT8, 1, b"\x00"))
    refused(write(tmp_path / "t.gguf", NAME + full + [one_more]), "4,194,305 items at 'tokenizer.b'", "4,194,304")


@pytest.mark.parametrize(("entries", "words"), [
    ([kv("k", UINT8, 1), kv("k", UINT8, 2)], ("'k' appears twice",)),
    ([kv("k", 13, b"")], ("value type 13",)),
    ([kv("k", ARRAY, array(ARRAY, 1, array(UINT8, 0)))], ("arrays of arrays",)),
    ([kv("k", ARRAY, array(21, 1))], ("element type 21",)),
    ([kv("k", STRING, b"\x02\x00\x00\x00\x00\x00\x00\x00\xff\xfe")], ("'k' is not UTF-8",)),
    ([kv("general.alignment", STRING, "32")], ("general.alignment has value type 8",)),
    ([kv("general.alignment", UINT32, 48)], ("general.alignment is 48", "power of two")),
    ([kv("general.alignment", UINT32, 0)], ("general.alignment is 0",)),
])
def test_malformed_metadata_is_named(tmp_path, entries, words):
    refused(write(tmp_path / "m.gguf", NAME + entries), *words)


def test_other_versions_and_big_endian_files_are_refused(tmp_path):
    refused(write(tmp_path / "v1.gguf", NAME, version=1), "GGUF version 1", "2 and 3")
    big = bytearray(gguf_bytes(NAME))
    big[4:8] = struct.pack(">I", 3)
    (tmp_path / "big.gguf").write_bytes(big)
    refused(tmp_path / "big.gguf", "big-endian")


def values(count: int) -> bytes:
    return np.arange(count, dtype="<f4").tobytes()


def test_a_tensor_index_with_aligned_disjoint_tensors_reads_the_right_bytes(tmp_path):
    infos = [tensor_info("a", (4, 2), F32, 0), tensor_info("b", (8,), F32, 64)]
    file = open_gguf(write(tmp_path / "ok.gguf", NAME, infos, values(16) + values(8)))
    assert file.tensors["a"].data.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]] and file.tensors["a"].shape == (4, 2)
    assert file.tensors["b"].data.tolist() == list(range(8))


@pytest.mark.parametrize(("infos", "words"), [
    ([tensor_info("a", (), F32, 0)], ("'a' has 0 dimensions", "1 to 4")),
    ([tensor_info("a", (1, 1, 1, 1, 1), F32, 0)], ("'a' has 5 dimensions",)),
    ([tensor_info("a", (4, 0), F32, 0)], ("'a' has dimensions [4, 0]",)),
    ([tensor_info("a", (4,), 99, 0)], ("'a' has GGML type 99",)),
    ([tensor_info("a", (33,), Q8_0, 0)], ("'a' has dimensions [33]", "32-value blocks")),
    ([tensor_info("x" * 64, (4,), F32, 0)], ("the name of tensor 0 claims 64 bytes", "63")),
    ([tensor_info("a", (4,), F32, 0), tensor_info("a", (4,), F32, 32)], ("'a' appears twice",)),
    ([tensor_info("a", (4,), F32, 16)], ("'a' starts at offset 16", "alignment 32")),
    ([tensor_info("a", (4,), F32, 0), tensor_info("b", (64,), F32, 32)], ("'b' ends at byte",)),
    ([tensor_info("a", (4,), F32, 2**64 - 64)], ("'a' ends at byte 18446744073709551", "truncated or corrupt")),
    ([tensor_info("a", (16,), F32, 0), tensor_info("b", (4,), F32, 32)],
     ("tensors 'a' (64 bytes at offset 0) and 'b' (at offset 32) share bytes",)),
    ([tensor_info(n, (4,), F32, 0) for n in "abc"], ("tensors 'a' (16 bytes at offset 0) and 'b'", "of its own")),
])
def test_a_bad_tensor_index_is_refused_by_name(tmp_path, infos, words):
    refused(write(tmp_path / "t.gguf", NAME, infos, values(32)), *words)
