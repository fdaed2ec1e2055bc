"""Graphs on the emulated device through torch.accelerator.Graph: capture records the device ops, replay re-runs
them on the captured buffers, the graph's memory lives as long as it does, and what a real device cannot capture
(host syncs, host copies, host-fallback ops) fails the capture naming the op. The spec's graph faults: ops wrong
only under replay, ops capture refuses, graphs off for a device."""

import json

import pytest

from bringup_emu.spec import SpecError, load_spec
from tests.emulator.emu_process import emu_results

NATIVE = ["mm", "add", "mul", "relu", "sum", "fill_", "cat"]
SPEC = {
    "devices": [{"name": "on", "memory": "64MiB"}, {"name": "off", "memory": "64MiB", "graphs": False}],
    "native": NATIVE,
    "capture_refused": ["cat"],
    "replay_wrong": {"relu": 3.0},
}

BODY = """
import gc

def refusal(body):
    graph = torch.accelerator.Graph()
    try:
        with graph:
            body()
    except RuntimeError as error:
        return str(error)
    return None

a, w = torch.randn(3, 4), torch.randn(4, 5)
ea, ew = a.to("emu"), w.to("emu")
stream, graph = torch.Stream(), torch.accelerator.Graph()
with stream, graph:
    out = torch.mm(ea, ew) * 2 + 1
captured = out.cpu()
replays = []
for seed in (1, 2):
    fresh = torch.randn(3, 4, generator=torch.Generator().manual_seed(seed))
    ea.copy_(fresh)
    graph.replay()
    replays.append(((out.cpu() - ((fresh @ w) * 2 + 1)).abs().max().item(), (fresh @ w).abs().max().item()))

# the pool: intermediates and the result allocated in capture, Python's references dropped, still replayed right
x = torch.ones(64, 64, device="emu")
before = torch.emu.memory_allocated(0)
pooled = torch.accelerator.Graph()
pooled.capture_begin()
y = ((x + 1) * 3).sum(0)
pooled.capture_end()
keep = y
del y
gc.collect()
held = torch.emu.memory_allocated(0) - before
x.fill_(2.0)
pooled.replay()
pooled_value = keep.cpu()[0].item()
del pooled, keep
gc.collect()
after = torch.emu.memory_allocated(0) - before

# replay_wrong: eager is right; the capture's own run is eager too; each replay scales relu's output
r = torch.tensor([[-1.0, 2.0]]).to("emu")
wrong = torch.accelerator.Graph()
with wrong:
    relu_out = torch.relu(r) + 0
eager_relu = relu_out.cpu().tolist()
wrong.replay()
replayed_relu = relu_out.cpu().tolist()

loop = torch.zeros(2, device="emu")
counter = torch.accelerator.Graph()
counter.capture_begin(); loop.add_(1); counter.capture_end()
counter.replay(); counter.replay()

refusals = dict(
    item=refusal(lambda: ea.sum().item()),
    to_host=refusal(lambda: ea.cpu()),
    from_host=refusal(lambda: torch.ones(2).to("emu")),
    fallback=refusal(lambda: torch.rsqrt(ea)),
    spec_refused=refusal(lambda: torch.cat([ea, ea])),
)
with torch.accelerator.device_index(1):
    off = refusal(lambda: torch.ones(2, device="emu:1") + 1)
from bringup.probes.capabilities.features import check_graphs
probe = [check_graphs(torch.device("emu", i)) for i in (0, 1)]
report(captured=captured.tolist(), eager=((a @ w) * 2 + 1).tolist(), replays=replays,
       held=held, pooled_value=pooled_value, after=after, eager_relu=eager_relu, replayed_relu=replayed_relu,
       loop=loop.cpu().tolist(), refusals=refusals, off=off, probe=probe,
       after_refusals=(torch.ones(2, device="emu") + 1).cpu().tolist())
"""


@pytest.fixture(scope="module")
def seen() -> dict:
    return emu_results(BODY, SPEC)


def test_capture_runs_the_ops_once_and_each_replay_reads_the_new_inputs(seen: dict) -> None:
    flat = [value for row in seen["captured"] for value in row]
    assert flat == pytest.approx([value for row in seen["eager"] for value in row], abs=1e-5)
    assert len(seen["replays"]) == 2
    for error, scale in seen["replays"]:
        assert scale > 0.1 and error < 1e-5  # the fresh values went through mm into the captured output


def test_an_in_place_op_replays_on_its_buffer(seen: dict) -> None:
    assert seen["loop"] == [3.0, 3.0]  # once in capture, twice replayed


def test_memory_allocated_in_capture_stays_while_the_graph_lives(seen: dict) -> None:
    # x + 1, its product with 3 and the sum stay allocated, though Python dropped all but the sum
    assert seen["held"] == 2 * 64 * 64 * 4 + 64 * 4
    assert seen["pooled_value"] == 64 * 9.0  # ((2 + 1) * 3) summed over 64 rows, replayed after the drop
    assert seen["after"] == 0  # freed with the graph


@pytest.mark.parametrize(("case", "names"), [
    ("item", ["aten::_local_scalar_dense", "host sync"]),
    ("to_host", ["aten::_copy_from", "a copy to the host"]),
    ("from_host", ["aten::_copy_from", "a copy from the host"]),
    ("fallback", ["aten::rsqrt.out", "host fallback"]),
    ("spec_refused", ["aten::cat", "capture_refused in the spec"]),
])
def test_what_a_device_cannot_capture_fails_the_capture_naming_the_op(seen: dict, case: str, names: list) -> None:
    message = seen["refusals"][case]
    assert message is not None and message.startswith("emu: the graph capture was invalidated: graph capture refused")
    for name in names:
        assert name in message


def test_a_refused_capture_leaves_the_device_usable(seen: dict) -> None:
    assert seen["after_refusals"] == [2.0, 2.0]


def test_graphs_off_for_a_device(seen: dict) -> None:
    assert seen["off"] == "emu: graphs are not supported on emu:1 (devices[1].graphs is false in the spec)"


def test_the_probe_finds_graphs_supported_and_unsupported_with_the_reason_where_the_spec_turns_them_off(
        seen: dict) -> None:
    on, off = seen["probe"]
    assert on["status"] == "supported"
    assert off["status"] == "unsupported"
    assert off["reason"] == ("torch.accelerator.Graph capture/replay failed: RuntimeError: emu: graphs are not "
                             "supported on emu:1 (devices[1].graphs is false in the spec)")


def test_an_op_wrong_under_replay_is_right_eagerly_and_scaled_when_replayed(seen: dict) -> None:
    assert seen["eager_relu"] == [[0.0, 2.0]]
    assert seen["replayed_relu"] == [[0.0, 6.0]]


@pytest.mark.parametrize(("raw", "message"), [
    ({"devices": [{"name": "d", "memory": 1, "graphs": "yes"}]}, "devices[0].graphs: must be true"),
    ({"replay_wrong": {"mm": 0}}, "replay_wrong['mm']: 0 is not a factor above 0"),
    ({"replay_wrong": ["mm"]}, "replay_wrong: must be a mapping of op name to scale factor"),
    ({"capture_refused": ["no_such_op"]}, "capture_refused[0]: 'no_such_op' is not an aten operator"),
    ({"capture_refused": "mm"}, "capture_refused: must be a list of strings"),
])
def test_a_bad_graph_field_is_one_line_naming_it(raw: dict, message: str) -> None:
    raw = {"devices": [{"name": "d", "memory": 1}], **raw}
    with pytest.raises(SpecError) as caught:
        load_spec(json.dumps(raw))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_default_spec_has_graphs_on_and_no_graph_faults() -> None:
    spec = load_spec("default")
    assert all(device.graphs for device in spec.devices)
    assert spec.capture_refused == () and spec.replay_wrong == {}
