"""A device lost mid-run (`devices[i].fail_after_ops`, `devices[i].lost_when`): from the op that loses it, every op
on the device raises its error (computing, copying to it, reading back), the other device keeps computing, and the
runner's check (engine/device_loss.py) names the lost device and only it. A bad value is refused in one line."""

from __future__ import annotations

import json

import httpx

from tests.emulator.emu_process import emu_results, run_python
from tests.emulator.runner_children import serve_cli
from tests.server.serve_live import free_port, started_or_fail

BODY = """
import os
from bringup.runner.engine.device_loss import answers
from bringup_emu import runtime
ext = runtime.extension()
x = torch.ones(4, device="emu:1")
errors = []
for step in range(3):
    try:
        x = x + 1
        errors.append(ext.device_ops(1))
    except RuntimeError as exc:
        errors.append(str(exc).splitlines()[0])
try:
    torch.ones(2).to("emu:1")
    copy = None
except RuntimeError as exc:
    copy = str(exc).splitlines()[0]
other = (torch.ones(2, device="emu:0") * 3).cpu().tolist()
from types import SimpleNamespace
from bringup.runner.engine.device_loss import device_loss
from bringup.runner.plan.choice import Choice
split = Choice({"mode": "layer_split", "devices": [{"device": "emu:0"}, {"device": "emu:1"}]}, "planned")
loss = device_loss(SimpleNamespace(device="emu:0", placement=split), RuntimeError("a step failed"))
split_lost = sorted(loss.lost)
single = device_loss(SimpleNamespace(device="emu:0", placement=Choice(None, "one device")), RuntimeError("x"))
pulled_before = answers("emu:0")
open(os.environ["PULL"], "w").close()
import time; time.sleep(0.01)
answers("emu:0")  # the first op after the file appeared may come before the look (once a millisecond)
time.sleep(0.01)
report(split_lost=split_lost, single=single is None, split_says=loss.message,
       errors=errors, copy=copy, other=other, lost=answers("emu:1"), pulled_before=pulled_before,
       pulled=answers("emu:0"))
"""


def test_a_device_fails_after_its_ops_and_once_its_file_appears_and_the_other_keeps_working(tmp_path) -> None:
    pull = tmp_path / "pull-emu0"
    spec = {"devices": [{"name": "stays", "memory": "1GiB", "lost_when": str(pull)},
                        {"name": "fails", "memory": "1GiB", "fail_after_ops": 5}]}
    seen = emu_results(BODY.replace('os.environ["PULL"]', repr(str(pull))), spec)
    assert 0 < seen["errors"][0] <= 5  # the first add ran within the device's 5 ops
    lost = "emu: device emu:1 is lost: it no longer answers (devices[1].fail_after_ops: 5 ops ran)"
    assert seen["errors"][1:] == [lost, lost]
    assert seen["copy"] == lost
    assert seen["other"] == [3.0, 3.0]
    assert seen["lost"] == f"RuntimeError: {lost}"
    assert seen["pulled_before"] is None
    assert seen["split_lost"] == ["emu:1"] and seen["single"]  # a split needs emu:1; a plan on emu:0 alone does not
    assert seen["split_says"] == (f"device lost mid-run: emu:1 no longer answers (RuntimeError: {lost}); the step "
                                  "failed with RuntimeError: a step failed; the requests in flight on it were "
                                  "failed; check the device (driver, power, bus) and start again")
    assert seen["pulled"] == ("RuntimeError: emu: device emu:0 is lost: it no longer answers "
                              f"(devices[0].lost_when: {pull} exists)")


def test_a_bad_fail_after_ops_is_refused_in_one_line() -> None:
    done = run_python("import torch", {"devices": [{"name": "x", "memory": "1GiB", "fail_after_ops": -2}]})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: BRINGUP_EMU_SPEC: devices[0].fail_after_ops: -2 is less than 0, the least it can be (the ops the "
        "device runs before it is lost: 0 or more) (see docs/emulator.md, or unset BRINGUP_EMU_SPEC)"]


def test_serve_fails_the_request_on_a_device_pulled_mid_run_and_stops_in_one_line(tmp_path) -> None:
    pull = tmp_path / "pull-emu0"
    spec = {"devices": [{"name": "pulled", "memory": "2GiB", "lost_when": str(pull)}]}
    port = free_port()
    server = serve_cli(["--device", "emu:0", "--port", str(port), "--max-model-len", "128"], spec, tmp_path)
    try:
        url = f"http://127.0.0.1:{port}"
        started_or_fail(url, server, 240, "serve --device emu:0")
        model = httpx.get(f"{url}/v1/models").json()["data"][0]["id"]
        pull.touch()  # the card falls off the bus while the server runs: the next request's first step fails
        with httpx.stream("POST", f"{url}/v1/completions", timeout=120, json={
                "model": model, "prompt": "one two three", "max_tokens": 8, "stream": True}) as stream:
            events = [line.removeprefix("data: ") for line in stream.iter_lines() if line.startswith("data: ")]
        code = server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    _, stderr = server.communicate(timeout=30)
    assert events[-1] == "[DONE]", events
    error = json.loads(events[-2])["error"]
    assert error["code"] == "engine_dead"
    lost = f"emu:0 no longer answers (RuntimeError: emu: device emu:0 is lost: it no longer answers (devices[0]" \
           f".lost_when: {pull} exists))"
    assert f"device lost mid-run: {lost}; the requests in flight on it were failed" in error["message"]
    assert code == 1
    said = " ".join(stderr.split())  # the log handler wraps long lines
    assert said.endswith(f"error: device lost mid-run: {lost}; the requests in flight on it were failed; check the "
                         "device (driver, power, bus) and start again"), stderr[-3000:]
    assert "Traceback" not in stderr
