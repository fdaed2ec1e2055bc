"""The per-device memory cap and the statistics torch.emu and torch.accelerator read."""

import pytest

from tests.emulator.emu_process import emu_results

SPEC = {"devices": [{"name": "small", "memory": "1MiB"}, {"name": "large", "memory": "4MiB"}]}

BODY = """
KiB = 1024
start = torch.emu.memory_allocated(0)
t = torch.empty(256 * KiB, dtype=torch.uint8, device="emu:0")
with_t = torch.emu.memory_allocated(0)
accel_with_t = torch.accelerator.memory_allocated(0)
stats_with_t = torch.accelerator.memory_stats(0)["allocated_bytes.all.current"]
info_with_t = list(torch.accelerator.get_memory_info(0))
u = torch.empty(128 * KiB, dtype=torch.uint8, device="emu:0")
del t, u
after_free = torch.emu.memory_allocated(0)
peak = torch.emu.max_memory_allocated(0)
accel_peak = torch.accelerator.max_memory_allocated(0)
torch.emu.reset_peak_memory_stats(0)
peak_after_reset = torch.emu.max_memory_allocated(0)
try:
    torch.empty(2 * 1024 * KiB, dtype=torch.uint8, device="emu:0")
    oom = None
except torch.OutOfMemoryError as error:
    oom = str(error)
big_on_large = torch.empty(2 * 1024 * KiB, dtype=torch.uint8, device="emu:1")
report(start=start, with_t=with_t, accel_with_t=accel_with_t, stats_with_t=stats_with_t, info_with_t=info_with_t,
       after_free=after_free, peak=peak, accel_peak=accel_peak, peak_after_reset=peak_after_reset, oom=oom,
       large_used=torch.emu.memory_allocated(1), large_info=list(torch.emu.mem_get_info(1)))
"""

KiB = 1024


@pytest.fixture(scope="module")
def seen() -> dict:
    return emu_results(BODY, SPEC)


def test_memory_allocated_tracks_allocations_and_frees(seen: dict) -> None:
    assert seen["with_t"] - seen["start"] == 256 * KiB
    assert seen["after_free"] == seen["start"]


def test_the_peak_holds_until_reset(seen: dict) -> None:
    assert seen["peak"] == seen["start"] + 384 * KiB
    assert seen["peak_after_reset"] == seen["after_free"]


def test_torch_accelerator_memory_apis_agree(seen: dict) -> None:
    assert seen["accel_with_t"] == seen["stats_with_t"] == seen["with_t"]
    assert seen["accel_peak"] == seen["peak"]
    assert seen["info_with_t"] == [1024 * KiB - seen["with_t"], 1024 * KiB]


def test_allocating_past_the_cap_raises_out_of_memory_naming_device_request_and_cap(seen: dict) -> None:
    assert seen["oom"] is not None
    assert "emu:0" in seen["oom"] and "2.00 MiB" in seen["oom"] and "1.00 MiB" in seen["oom"]


def test_each_device_has_its_own_cap(seen: dict) -> None:
    assert seen["large_used"] == 2 * 1024 * KiB
    assert seen["large_info"] == [2 * 1024 * KiB, 4 * 1024 * KiB]
