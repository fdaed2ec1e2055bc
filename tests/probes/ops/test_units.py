import time

from bringup.probes.ops.compiled.execute import ladder_for
from bringup.probes.ops.compiled.rule import judge, multiplier
from bringup.probes.ops.runner import Checkpointer
from bringup.profiles.sections.ops import OpCaseRecord


def _record(n: int, status: str) -> OpCaseRecord:
    return OpCaseRecord(op="exp", dtype="float32", case=str(n), status=status)


def test_ladder_order_and_early_end():
    assert ladder_for("inductor") == ["eager", "aot_eager", "aot_eager_decomp_partition", "inductor"]
    assert ladder_for("aot_eager") == ["eager", "aot_eager"]


def test_compiled_rule_is_k_times_eager_plus_tol_over_10():
    assert multiplier("float32", 1000) == 2.0 and multiplier("bfloat16", 1000) == 3.0
    assert multiplier("float32", 4) == 3.0
    ok = judge("float32", eager_err=1e-6, compiled_err=1.1e-5, numel=1000)  # 2e-6 + 1e-5
    assert ok.accepted and ok.allowed == 2e-6 + 1e-5
    assert not judge("float32", eager_err=1e-6, compiled_err=1.3e-5, numel=1000).accepted


def test_checkpointer_flushes_crashes_at_once_and_stretches_with_slow_writes():
    writes = []

    def slow_write(batch, final):
        writes.append(([int(r.case) for r in batch], final))
        time.sleep(0.05)

    cp = Checkpointer(slow_write, interval_s=0.01)
    cp.add(_record(0, "pass"))
    time.sleep(0.02)
    cp.add(_record(1, "pass"))  # due: first write happens, taking 0.05 s
    assert writes == [([0, 1], False)]
    time.sleep(0.02)
    cp.add(_record(2, "pass"))  # interval now 5 * 0.05 s: held back
    assert len(writes) == 1
    cp.add(_record(3, "crashed"))  # crashes are written at once
    assert writes[-1] == ([2, 3], False)
    cp.flush(final=True)
    assert writes[-1] == ([], True)
