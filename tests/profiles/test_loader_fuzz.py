"""Random and mutated documents either load or raise the tool's own one-line error — nothing else."""

import copy

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


def check(text: str) -> None:
    try:
        parse_profile("fuzz.yaml", text)  # type: ignore[arg-type]
    except BringupError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


@settings(max_examples=200, deadline=None)
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
@settings(max_examples=100, deadline=None)
def test_arbitrary_text(text):
    check(text)


def test_the_valid_document_loads():
    assert parse_profile("ok.yaml", yaml.safe_dump(VALID)).device.id == "cpu"  # type: ignore[arg-type]
