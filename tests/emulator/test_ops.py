"""Ops give the CPU's numbers natively and through the fallback; the counter counts exactly the fallback calls."""

import pytest

from tests.emulator.emu_process import emu_results

SPEC = {
    "devices": [{"name": "Emu test", "memory": "64MiB"}, {"name": "Emu other", "memory": "64MiB"}],
    "native": ["mm", "add", "cat", "index_select"],
}

BODY = """
from torch.profiler import ProfilerActivity, profile

torch.manual_seed(0)
a, b = torch.randn(8, 16), torch.randn(16, 4)
idx = torch.tensor([3, 0, 2])
cases = {
    "mm": lambda a, b, idx: a @ b,
    "add": lambda a, b, idx: a + a[0],
    "cat": lambda a, b, idx: torch.cat([a, a[:2]]),
    "index_select": lambda a, b, idx: a.index_select(0, idx),
    "sort": lambda a, b, idx: torch.sort(a, dim=-1).values,
    "topk": lambda a, b, idx: torch.topk(a, 3).indices,
    "rsqrt": lambda a, b, idx: a.abs().rsqrt(),
    "softmax": lambda a, b, idx: torch.softmax(a, dim=-1),
    "view": lambda a, b, idx: a.view(4, 32).t()[1:3],
    "inplace": lambda a, b, idx: a.clone().mul_(2).add_(1),
}
ea, eb, eidx = a.to("emu"), b.to("emu"), idx.to("emu")
same, counts = {}, {}
for name, fn in cases.items():
    expected = fn(a, b, idx)
    bringup_emu.reset_fallback_counts()
    got = fn(ea, eb, eidx)
    counts[name] = bringup_emu.fallback_counts()
    same[name] = got.device.type == "emu" and torch.equal(got.cpu(), expected)

bringup_emu.reset_fallback_counts()
for _ in range(3):
    ea.abs().rsqrt()
rsqrt_three = bringup_emu.fallback_counts()

def dispatched(fn):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return sorted({event.name for event in prof.events()})

def refusal(fn):
    try:
        fn()
    except RuntimeError as error:
        return str(error)
    return None

out = torch.empty(0, device="emu")
returned = torch.add(ea, ea, out=out)  # native, and the out tensor must grow
values, indices = torch.empty(0, device="emu"), torch.empty(0, dtype=torch.long, device="emu")
torch.sort(ea, dim=0, out=(values, indices))  # through the fallback, growing both outputs
base = torch.zeros(12, device="emu")
window = base.unfold(0, 4, 4)  # a view op with only a CPU kernel: must share the device memory
base[5] = 7.0
other = torch.ones(8, 16, device="emu:1")
report(same=same, counts=counts, rsqrt_three=rsqrt_three,
       native_events=dispatched(lambda: ea @ eb), fallback_events=dispatched(lambda: torch.sort(ea, dim=-1)),
       out_is_returned=returned is out, out_right=torch.equal(out.cpu(), a + a),
       sort_out_right=torch.equal(values.cpu(), torch.sort(a, dim=0).values)
       and torch.equal(indices.cpu(), torch.sort(a, dim=0).indices),
       view_shares=window.cpu()[1].tolist(), view_device=str(window.device),
       mixed_native=refusal(lambda: ea + other), mixed_fallback=refusal(lambda: torch.rsqrt(ea, out=other)))
"""

NATIVE = ("mm", "add", "cat", "index_select", "view")
FALLBACK = {"sort": "aten::sort.values_stable", "topk": "aten::topk.values", "softmax": "aten::_softmax.out"}


@pytest.fixture(scope="module")
def seen() -> dict:
    return emu_results(BODY, SPEC)


def test_every_op_gives_the_cpus_numbers_natively_or_through_the_fallback(seen: dict) -> None:
    assert seen["same"] == dict.fromkeys(seen["same"], True)


@pytest.mark.parametrize("name", NATIVE)
def test_a_native_op_counts_no_fallback(seen: dict, name: str) -> None:
    assert seen["counts"][name] == {}


@pytest.mark.parametrize(("name", "op"), sorted(FALLBACK.items()))
def test_a_fallback_op_counts_once_per_call(seen: dict, name: str, op: str) -> None:
    assert seen["counts"][name] == {op: 1}


def test_the_counter_adds_up_calls_and_names_only_the_fallback_ops(seen: dict) -> None:
    # abs is not native in this spec: both ops of the chain went through the fallback, three times each
    assert seen["rsqrt_three"] == {"aten::abs.out": 3, "aten::rsqrt.out": 3}
    assert seen["counts"]["inplace"] == {"aten::mul.out": 1}  # clone is a copy (the device's own), add_ is native


def test_a_native_op_dispatches_no_host_copy_and_a_fallback_op_does(seen: dict) -> None:
    copies = {"aten::_to_cpu", "aten::_copy_from"}
    assert not copies & set(seen["native_events"]), seen["native_events"]
    assert copies <= set(seen["fallback_events"]), seen["fallback_events"]


def test_out_tensors_that_must_grow_are_the_results_natively_and_through_the_fallback(seen: dict) -> None:
    assert seen["out_is_returned"] is True and seen["out_right"] is True
    assert seen["sort_out_right"] is True


def test_a_view_op_shares_the_device_memory(seen: dict) -> None:
    assert seen["view_device"] == "emu:0"
    assert seen["view_shares"] == [0.0, 7.0, 0.0, 0.0]


@pytest.mark.parametrize("case", ["mixed_native", "mixed_fallback"])
def test_tensors_on_two_devices_in_one_op_are_refused(seen: dict, case: str) -> None:
    assert "Expected all tensors to be on the same device" in seen[case]
    assert "emu:0" in seen[case] and "emu:1" in seen[case]
