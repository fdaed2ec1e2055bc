"""Random and mutated documents either load or raise the tool's own one-line error — nothing else.

The property tests are derandomized (the same examples every run, in CI and locally) and keep no example
database, so they write nothing into the working directory. Cases they once found stay as plain tests below.
"""

import copy

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bringup.errors import BringupError
from bringup.profiles.store import parse_profile

VALID = {
    "schema": "bringup.profile/v1",
    "device": {"id": "cpu", "backend": "cpu", "name": "CPU", "memory_total_bytes": 1024, "extra": {"isa": "AVX2"}},
    "capabilities": {"dtypes": {"float32": {"status": "supported", "evidence": "ok", "seconds": 0.1}}},
    "ops": [{"op": "softmax", "dtype": "float32", "case": "c", "status": "pass", "max_abs": 0.0}],
    "stages": {"probe": {"started": "t", "finished": "t", "bringup": "0.1.0", "status": "complete"}},
}

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20))
documents = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children,
                                                                               max_size=4)),
    max_leaves=20,
)


REPRODUCIBLE = settings(derandomize=True, database=None, deadline=None)


def assert_one_line(message: str) -> None:
    assert len(message.splitlines()) == 1 and message.isprintable(), repr(message)


def check(text: str) -> None:
    try:
        parse_profile("fuzz.yaml", text)  # type: ignore[arg-type]
    except BringupError as exc:
        assert_one_line(str(exc))


@settings(REPRODUCIBLE, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_random_documents(doc):
    check(yaml.safe_dump(doc))


def paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths(v, (*prefix, i))


ALL_PATHS = [p for p in paths(VALID) if p]


@settings(REPRODUCIBLE, max_examples=200)
@given(st.sampled_from(ALL_PATHS), documents, st.booleans())
def test_mutated_documents(path, replacement, delete):
    doc = copy.deepcopy(VALID)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    check(yaml.safe_dump(doc))


@given(st.text(max_size=200))
@settings(REPRODUCIBLE, max_examples=100)
def test_arbitrary_text(text):
    check(text)


def test_the_valid_document_loads():
    assert parse_profile("ok.yaml", yaml.safe_dump(VALID)).device.id == "cpu"  # type: ignore[arg-type]


def error_for(doc: dict) -> str:
    with pytest.raises(BringupError) as caught:
        parse_profile("regression.yaml", yaml.safe_dump(doc))  # type: ignore[arg-type]
    return str(caught.value)


CONTROL_KEYS = ["bad\nkey", "bad\rkey", "bad\x00key", "bad\x1b[31mkey", "bad\x85key", "bad\u2028key"]
LEVELS = [(), ("device",), ("capabilities", "dtypes"), ("capabilities", "dtypes", "float32")]


@pytest.mark.parametrize("key", CONTROL_KEYS, ids=ascii)
@pytest.mark.parametrize("level", LEVELS, ids=lambda level: ".".join(level) or "top")
def test_a_control_character_in_a_key_is_escaped_in_a_one_line_error(level: tuple[str, ...], key: str) -> None:
    # found by test_random_documents: the field path was printed raw, so the message had a newline in it
    doc = copy.deepcopy(VALID)
    parent = doc
    for name in level:
        parent = parent[name]
    parent[key] = {"status": "maybe"}
    message = error_for(doc)
    assert_one_line(message)
    assert f"field {'.'.join((*level, repr(key)))}" in message


def test_an_ordinary_field_path_stays_readable() -> None:
    doc = copy.deepcopy(VALID)
    doc["device"]["memory_total_bytes"] = "lots"
    assert "field device.memory_total_bytes: " in error_for(doc)


@pytest.mark.parametrize("text", ["a\x00", "key: 1\n\x1b", "!<tag:a%0Ab> x", "a: [1,\n", '"\u2028'], ids=ascii)
def test_yaml_errors_are_one_line(text: str) -> None:
    with pytest.raises(BringupError, match="not valid YAML") as caught:
        parse_profile("regression.yaml", text)  # type: ignore[arg-type]
    assert_one_line(str(caught.value))


def test_a_control_character_in_the_schema_value_is_escaped() -> None:
    message = error_for({**VALID, "schema": "v1\nv2"})
    assert_one_line(message)
    assert "'v1\\nv2'" in message
