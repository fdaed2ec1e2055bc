"""The event-built reader gives exactly what the safe loader gives, refuses anchors and depth while parsing, and
hands anything beyond plain data back to the full loader."""

import pytest
import yaml

from bringup.profiles.plain_yaml import AnchorFound, NeedsFullLoader, TooDeep, load_plain

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SCALARS = ["017", "0o17", "0x1F", "0b101", "1_000", "-0", "+5", "1:30", "190:20:30", "1.5", "-1.5e+3", "1_000.5",
           "1.", ".5", ".inf", "-.Inf", ".NaN", "1e5", "6.8523015e+5", "yes", "No", "on", "OFF", "true", "False", "~",
           "null", "2026-12-01", "2026-12-01T10:00:00Z", "'017'", '"1.5"', "abc", "'a''b'", '"\\e[2J"',
           "9" * 40, "0.1", "00", "0", "-0x1F", "<<x"]


@pytest.mark.parametrize("scalar", SCALARS)
def test_each_scalar_reads_as_the_safe_loader_reads_it(scalar: str) -> None:
    text = f"a: {scalar}\nlist: [{scalar}, x]\n{scalar or 'k'}: v\n"
    expected = yaml.load(text, Loader=SAFE_LOADER)
    got = load_plain(text, 64)
    if isinstance(expected["a"], float) and expected["a"] != expected["a"]:  # NaN is equal to nothing
        assert got["a"] != got["a"]
        return
    assert got == expected and [type(v) for v in got.values()] == [type(v) for v in expected.values()]


@pytest.mark.parametrize("text", ["", "# only a comment\n", "[1, 2]\n", "a: 1\na: 2\n", "a:\n  - b: {c: [1, {}]}\n",
                                  "? a\n: 1\n", "a:\n", "a: !!str 1\n", "'quoted key': |\n  block\n  text\n",
                                  "x: >\n  folded\n  text\n"])
def test_documents_read_as_the_safe_loader_reads_them(text: str) -> None:
    assert load_plain(text, 64) == yaml.load(text, Loader=SAFE_LOADER)


@pytest.mark.parametrize(("text", "line"), [("a: &x 1\nb: 2\n", 1), ("a: 1\nb: *x\n", 2), ("a:\n  b: &l [1]\n", 2)])
def test_anchors_and_aliases_are_refused_where_they_are(text: str, line: int) -> None:
    with pytest.raises(AnchorFound) as found:
        load_plain(text, 64)
    assert found.value.line == line


def test_depth_is_bounded_while_parsing() -> None:
    assert load_plain("a: " + "[" * 63 + "]" * 63, 64) is not None
    with pytest.raises(TooDeep):
        load_plain("a: " + "[" * 64 + "]" * 64, 64)


@pytest.mark.parametrize("text", ["a: =\n", "a: !custom x\n", "<<: {a: 1}\n", "? [1]\n: x\n", "? {a: 1}\n: x\n",
                                  "a: 1\n---\nb: 2\n", "a: !!map {b: 1}\n"])
def test_tags_merges_complex_keys_and_streams_go_to_the_full_loader(text: str) -> None:
    with pytest.raises(NeedsFullLoader):
        load_plain(text, 64)


def test_an_integer_python_cannot_hold_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        load_plain("a: " + "9" * 5000, 64)
