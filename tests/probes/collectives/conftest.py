import psutil
import pytest

from tests.probes.collectives import helpers


@pytest.fixture(autouse=True)
def record_preexisting_children():
    helpers.PREEXISTING.clear()
    helpers.PREEXISTING.update(p.pid for p in psutil.Process().children(recursive=True))
    yield
