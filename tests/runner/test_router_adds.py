"""The replica router hands a request to a replica in the middle of a step without waiting for the step: the other
replicas keep stepping meanwhile. Two real engines on the CPU; one replica's step is held on an event, as a slow
device's long step would hold it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.engine.replicas.replica import Replica
from bringup.runner.engine.replicas.router import ReplicaRouter
from bringup.runner.sampling_params import SamplingParams
from tests.runner.stated import stated

GREEDY = SamplingParams(max_tokens=4, temperature=0, ignore_eos=True)
LONG = list(range(5, 45))  # 40 tokens: only the second replica's 64-token context holds it with room to generate


def replica(tmp_path: Path, name: str, context: int) -> Replica:
    thread = ThreadPoolExecutor(max_workers=1)
    options = EngineOptions(device="cpu", profile_path=tmp_path / "none.yaml", max_model_len=context, max_num_seqs=4,
                            measurements=stated())
    return Replica(name, thread.submit(LLMEngine.create, options).result(), thread, 1e-3)


@pytest.fixture
def held(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A router over a short-context replica and a long-context one whose steps wait for `release`."""
    short, long = replica(tmp_path, "short", 16), replica(tmp_path, "long", 64)
    release = threading.Event()
    own_step = long.engine.step

    def held_step():  # type: ignore[no-untyped-def]
        assert release.wait(30), "the test never released the held step"
        return own_step()
    long.engine.step = held_step
    router = ReplicaRouter([short, long])
    yield router, short, long, release
    release.set()


def finish(router: ReplicaRouter) -> dict[str, tuple[str, list[int], str | None]]:
    ended = {}
    while router.has_unfinished():
        for out in router.step():
            if out.finished:
                ended[out.request_id] = (out.finish_reason, out.token_ids, out.error and out.error.message)
    return ended


def test_a_request_for_a_replica_in_mid_step_is_taken_without_waiting_and_served(held, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    router, short, long, release = held
    router.add_request("long-1", LONG, GREEDY)
    router.add_request("short-1", [1, 2, 3], GREEDY)
    assert "long-1" in long.held and "short-1" in short.held
    first = router.step()  # the short replica's step returns while the long one's is held
    assert [out.request_id for out in first] == ["short-1"] and long.stepping is not None

    adding = threading.Thread(target=router.add_request, args=("long-2", LONG, GREEDY))
    adding.start()
    adding.join(10)
    assert not adding.is_alive(), "add_request waited for the held step"
    assert "long-2" in long.held and not long.stepping.done()
    again = router.step()  # the short replica steps on while the long one is still held
    assert [out.request_id for out in again] == ["short-1"]

    release.set()
    ended = finish(router)
    assert {name: (reason, len(tokens), error) for name, (reason, tokens, error) in ended.items()} == {
        "short-1": ("length", 4, None), "long-1": ("length", 4, None), "long-2": ("length", 4, None)}
    alone = ReplicaRouter([replica(tmp_path, "alone", 64)])  # the same request on a replica of its own
    alone.add_request("long-2", LONG, GREEDY)
    assert finish(alone)["long-2"][1] == ended["long-2"][1]


def test_bad_input_is_refused_on_the_callers_thread_while_the_replica_steps(held) -> None:  # type: ignore[no-untyped-def]
    router, _, long, _ = held
    router.add_request("long-1", LONG, GREEDY)
    long.stepping = long.thread.submit(long.timed_step)  # held mid-step
    with pytest.raises(ValueError, match="outside the vocabulary"):
        router.add_request("bad", [*LONG[:-1], 10**6], GREEDY)
    with pytest.raises(ValueError, match="already running"):
        router.add_request("long-1", LONG, GREEDY)
    assert "bad" not in long.held and "bad" not in long.adding


def test_an_add_that_fails_on_the_replicas_thread_ends_its_request_with_the_error(held) -> None:  # type: ignore[no-untyped-def]
    router, _, long, release = held
    router.add_request("long-1", LONG, GREEDY)
    long.stepping = long.thread.submit(long.timed_step)  # held mid-step

    def broken_add(*_):  # type: ignore[no-untyped-def]
        raise RuntimeError("the scheduler refused it")
    long.engine.add_request = broken_add
    router.add_request("long-2", LONG, GREEDY)
    release.set()
    ended = finish(router)
    assert ended["long-1"][0] == "length"
    assert ended["long-2"] == ("error", [], "the replica on long did not take the request: the scheduler refused it")
    assert not long.held and not long.adding
