"""A server started on a busy machine keeps the default batch limit: one noisy second at start-up is no evidence
(issue 25). The hog is real: a busy loop in another process on every core, bounded in time."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

from bringup.runner.plan.plan import DEFAULT_MAX_NUM_SEQS
from tests.server.serve_live import start_server

HOG_S = 120  # each hog ends by itself after this long, even if the test dies


def start_hogs() -> list[subprocess.Popen]:
    loop = f"import time\nend = time.monotonic() + {HOG_S}\nwhile time.monotonic() < end:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(os.cpu_count() or 1)]


def stop(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        hog.kill()
        hog.wait()


def served_batch_limit(tmp_path) -> dict:
    server = start_server(tmp_path, max_model_len=256)
    try:
        return httpx.get(f"{server.base_url}/plan", timeout=10).json()["plan"]["max_num_seqs"]
    finally:
        server.stop()


@pytest.mark.slow
def test_a_server_started_while_every_core_is_busy_does_not_batch_less_than_the_default(tmp_path):
    hogs = start_hogs()
    try:
        busy = served_batch_limit(tmp_path)
    finally:
        stop(hogs)
    assert busy["value"] >= DEFAULT_MAX_NUM_SEQS, busy["evidence"]
    assert "on this model" in busy["evidence"]


@pytest.mark.slow
def test_the_same_server_on_a_quiet_machine_chooses_its_batch_limit_by_measurement(tmp_path):
    quiet = served_batch_limit(tmp_path)
    assert "decode tokens/s by batch on this model (1: " in quiet["evidence"]  # swept; the value is the machine's
