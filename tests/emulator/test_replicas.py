"""The replica router over two real engines on emulated devices (start-up measurements given as data, so the test
states what it depends on): short requests fill the faster replica's batches until the slower one predicts the
earlier completion; a prompt only the larger replica
holds goes there and is served; when one device is pulled, its requests fail naming it, the router logs and counts
it, and the other replica serves on, new requests included."""

from __future__ import annotations

from tests.emulator.emu_process import emu_results

BODY = """
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from bringup.runner.engine.engine import LLMEngine
from bringup.runner.engine.options import EngineOptions
from bringup.runner.engine.replicas.replica import Replica
from bringup.runner.engine.replicas.router import ReplicaRouter
from bringup.runner.sampling_params import SamplingParams
from tests.runner.stated import stated

def replica(device, context, seconds, seqs):
    thread = ThreadPoolExecutor(max_workers=1)
    options = EngineOptions(device=device, max_model_len=context, max_num_seqs=seqs,
                            measurements=stated(free_bytes=256 << 20))
    return Replica(device, thread.submit(LLMEngine.create, options).result(), thread, seconds)

# fast with a short context and a batch of 2, slow with a long context
router = ReplicaRouter([replica("emu:0", 64, 1e-3, 2), replica("emu:1", 256, 2e-3, 8)])

def run(prompts, max_tokens=8):
    for name, prompt in prompts.items():
        router.add_request(name, prompt, SamplingParams(max_tokens=max_tokens, temperature=0))
    where = {name: next(r.device for r in router.replicas if name in r.held) for name in prompts}
    ended = {}
    while router.has_unfinished():
        for out in router.step():
            if out.finished:
                ended[out.request_id] = (out.finish_reason, len(out.token_ids),
                                         out.error.message if out.error else None)
    return where, ended

short = {f"s{i}": [1, 2, 3, 4 + i] for i in range(6)}
long = {"long": list(range(5, 105))}  # 100 tokens: only emu:1's 256-token context holds it
where, ended = run({**short, **long})
Path(PULL).touch()
import time; time.sleep(0.01)
lost_where, lost_ended = run({f"p{i}": [7, 8, 9 + i] for i in range(6)})
after_where, after_ended = run({"after": [3, 2, 1]})
report(where=where, ended=ended, lost_where=lost_where, lost_ended=lost_ended, after_where=after_where,
       after_ended=after_ended, stats=router.stats())
"""


def test_the_router_spreads_requests_sends_the_long_prompt_to_the_large_replica_and_survives_a_lost_one(
        tmp_path) -> None:
    pull = tmp_path / "pull-emu0"
    spec = {"devices": [{"name": "fast", "memory": "2GiB", "lost_when": str(pull)},
                        {"name": "slow", "memory": "2GiB"}], "refused_dtypes": ["float64"]}
    seen = emu_results(f"PULL = {str(pull)!r}\n" + BODY, spec)
    where, ended = seen["where"], seen["ended"]
    assert where["long"] == "emu:1" and ended["long"] == ["length", 8, None]
    shorts = [where[f"s{i}"] for i in range(6)]
    assert shorts == ["emu:0"] * 4 + ["emu:1"] * 2  # the faster takes two batches of 2 before the slower pays
    assert all(ended[f"s{i}"] == ["length", 8, None] for i in range(6))
    on_lost = [name for name, device in seen["lost_where"].items() if device == "emu:0"]
    assert on_lost == ["p0", "p1", "p2", "p3"]
    for name, (reason, _, message) in seen["lost_ended"].items():
        if name in on_lost:
            assert reason == "error" and message.startswith("device lost mid-run: emu:0 no longer answers")
            assert "the other replicas serve on" in message
        else:
            assert (reason, message) == ("length", None)
    assert seen["after_where"] == {"after": "emu:1"} and seen["after_ended"]["after"][0] == "length"
    stats = seen["stats"]
    assert stats["replicas_lost"] == 1
    assert [r["device"] for r in stats["replicas"]] == ["emu:0", "emu:1"]
    assert stats["replicas"][0]["lost"].startswith("device lost mid-run: emu:0")
    assert stats["replicas"][1]["lost"] is None
