"""Backend choice per device family (with the reason, and the logged fallback) and bad input: no launches."""

import pytest

from bringup.errors import BringupError, StrictFallbackError
from bringup.fallbacks import FallbackRecorder
from bringup.probes.collectives.backend_choice import choose_backend
from bringup.probes.collectives.staging.group import BACKEND_NAME as HOST_STAGED
from tests.cli.run_cli import run_cli


def test_cpu_uses_gloo_with_the_reason():
    recorder = FallbackRecorder()
    choice = choose_backend("auto", "cpu", "cpu", recorder)
    assert (choice.name, choice.device_type) == ("gloo", "cpu")
    assert "default backend" in choice.reason
    assert recorder.events == []


def test_missing_device_library_falls_back_to_gloo_staged_through_the_host_visibly_and_strict_refuses():
    import torch.distributed as dist

    if dist.is_backend_available("nccl"):
        pytest.skip("this torch build has NCCL; the fallback cannot be observed")
    recorder = FallbackRecorder()
    choice = choose_backend("auto", "cuda", "cuda", recorder)
    assert (choice.name, choice.device_type, choice.data_path) == (HOST_STAGED, "cuda", "host_staged")
    assert recorder.counts["path"] == 1 and recorder.events[0].wanted == "nccl"
    assert recorder.events[0].instead == "gloo with the buffers staged through the host"
    assert "nccl is not available" in choice.reason and "bandwidth include the device-host copies" in choice.reason
    with pytest.raises(StrictFallbackError):
        choose_backend("auto", "cuda", "cuda", FallbackRecorder(strict=True))
    with pytest.raises(BringupError, match="not available"):
        choose_backend("nccl", "cuda", "cuda", FallbackRecorder())


def test_a_family_that_declares_no_library_gets_the_staged_group_and_the_reason_says_so():
    recorder = FallbackRecorder()
    choice = choose_backend("auto", "newchip", "newchip", recorder)
    assert (choice.name, choice.device_type, choice.data_path) == (HOST_STAGED, "newchip", "host_staged")
    assert recorder.events[0].wanted == "a device-native collective library for newchip"
    assert "names a collective library for device type 'newchip'" in recorder.events[0].why


def test_the_staged_group_can_be_asked_for_and_host_only_backends_keep_host_buffers():
    staged = choose_backend(HOST_STAGED, "newchip", "newchip", FallbackRecorder(strict=True))
    assert (staged.device_type, staged.data_path, staged.reason) == ("newchip", "host_staged",
                                                                     "requested with --backend")
    gloo = choose_backend("gloo", "newchip", "newchip", FallbackRecorder(strict=True))
    assert (gloo.device_type, gloo.data_path) == ("cpu", "host")


@pytest.mark.parametrize("args, message", [
    (["--nproc", "0"], "--nproc"),
    (["--sizes", "4Q"], "--sizes"),
    (["--dtype", "float8"], "--dtype"),
    (["--op", "all_reduce_min"], "--op"),
    (["--inject-fault", "rank=1:explode"], "--inject-fault"),
    (["--backend", "no-such-backend"], "not available"),
    (["--timeout", "0"], "--timeout"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    result = run_cli(["verify-collectives", "--device", "cpu", "--profile", str(tmp_path / "p.yaml"), *args])
    assert result.code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert "Traceback" not in result.stderr
