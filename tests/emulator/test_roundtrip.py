"""Tensors go to the device and back exactly, in every dtype, across devices; seeds, events, capabilities."""

import pytest

from tests.emulator.emu_process import emu_results

SPEC = {"devices": [{"name": "a", "memory": "16MiB"}, {"name": "b", "memory": "16MiB"}], "refused_dtypes": [],
        "native": ["uniform_"]}
DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool",
          "complex64", "float8_e4m3fn"]

BODY = """
torch.manual_seed(0)
exact = {}
for name in %r:
    dtype = getattr(torch, name)
    raw = torch.randint(0, 2 if name == "bool" else 256, (5, 7, 2), dtype=torch.uint8)
    host = raw.view(dtype) if dtype.itemsize == 1 else torch.randn(5, 7, 2).to(dtype)
    on_0 = host.to("emu:0")
    on_1 = on_0.to("emu:1")
    strided = host.transpose(0, 2)[::2].to("emu:1")
    exact[name] = (on_0.dtype == dtype and str(on_1.device) == "emu:1"
                   and torch.equal(on_1.cpu().view(torch.uint8), host.view(torch.uint8))
                   and torch.equal(strided.cpu().contiguous().view(torch.uint8),
                                   host.transpose(0, 2)[::2].contiguous().view(torch.uint8)))

torch.manual_seed(7)
emu_draw = torch.randn(4, device="emu").cpu()
torch.manual_seed(7)
cpu_draw = torch.randn(4)
state = torch.emu.get_rng_state()
first = torch.rand(3, device="emu").cpu()
torch.emu.set_rng_state(state)
again = torch.rand(3, device="emu").cpu()
torch.manual_seed(11)
torch.emu.manual_seed(5)
native_draw = torch.rand(3, device="emu").cpu()  # uniform_ is native here: it must use the emu generator
host_after = torch.rand(3)
torch.manual_seed(5)
native_expected = torch.rand(3)
torch.manual_seed(11)
host_expected = torch.rand(3)
gen = torch.Generator("emu").manual_seed(3)
own_gen = torch.randn(2, device="emu", generator=gen).cpu()

start, end = torch.Event("emu", enable_timing=True), torch.Event("emu", enable_timing=True)
start.record()
torch.ones(64, 64, device="emu") @ torch.ones(64, 64, device="emu")
end.record()
end.synchronize()

report(exact=exact, seeded=torch.equal(emu_draw, cpu_draw), replay=torch.equal(first, again),
       native_seeded=torch.equal(native_draw, native_expected), host_untouched=torch.equal(host_after, host_expected),
       generator_device=str(gen.device), own_gen=len(own_gen), elapsed=start.elapsed_time(end))
"""


@pytest.fixture(scope="module")
def seen() -> dict:
    return emu_results(BODY % (DTYPES,), SPEC)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_tensor_round_trips_host_device_device_host_exactly(seen: dict, dtype: str) -> None:
    assert seen["exact"][dtype] is True


def test_seeded_draws_on_the_device_match_the_cpus_and_replay_from_saved_state(seen: dict) -> None:
    assert seen["seeded"] is True
    assert seen["replay"] is True
    assert seen["generator_device"] == "emu:0" and seen["own_gen"] == 2


def test_native_random_ops_draw_from_the_emu_generator_not_the_hosts(seen: dict) -> None:
    assert seen["native_seeded"] is True
    assert seen["host_untouched"] is True


def test_events_measure_elapsed_time(seen: dict) -> None:
    assert seen["elapsed"] >= 0.0
