"""The spec's `numerics` field on the emulated device: legal variants pass verify-ops' judge in every case, biased
ones fail in every family (sums, cumsum, matmul, softmax, norms), in float32, bfloat16 and float16."""

import json

import pytest

from bringup_emu.spec import SpecError, parse_spec
from tests.emulator.emu_process import run_emu

DEVICE = [{"name": "Emu numerics", "memory": "8GiB"}]
NATIVE = ["mm", "bmm", "addmm", "baddbmm", "cumsum", "sum", "mean", "_softmax", "_log_softmax", "rsqrt"]
OPS = ["cumsum", "sum", "mean", "matmul", "linear", "bmm", "addmm", "baddbmm", "softmax", "log_softmax", "rms_norm",
       "layer_norm"]
LEGAL = {"cumsum": "stored_partials", "sum": "stored_partials", "mean": "stored_partials", "mm": "split_k",
         "bmm": "split_k", "addmm": "split_k", "baddbmm": "split_k", "_softmax": "stored_exps",
         "_log_softmax": "stored_exps"}
NORMS = ["rms_norm", "layer_norm"]
# the norms reach this device as their pieces (rms_norm: mean, rsqrt; layer_norm: native_batch_norm): biased alone,
# since a biased mean under rms_norm's rsqrt would cancel half of a biased rsqrt
BIASED = {"sums, products, softmax": ["cumsum", "sum", "mean", "mm", "bmm", "addmm", "baddbmm", "_softmax",
                                      "_log_softmax"],
          "norms": ["rsqrt", "native_batch_norm"]}

RUN_CASES = """
import collections
from bringup.probes.ops.catalog import load_catalog, select_cases
from bringup.probes.ops.execute import run_case
catalog = load_catalog()
failed, total = collections.Counter(), collections.Counter()
for key in select_cases(catalog, ops={ops!r}, dtypes={dtypes!r}):
    record = run_case(key, catalog, torch.device("emu:0"))
    total[key.op] += 1
    failed[key.op] += record.status != "pass"
report(failed=failed, total=total)
"""


def _run(numerics: dict, dtypes: list[str], ops: list[str] = OPS) -> tuple[dict, dict]:
    spec = {"devices": DEVICE, "native": NATIVE, "numerics": numerics}
    done = run_emu(RUN_CASES.format(ops=ops, dtypes=dtypes), spec, timeout=900)  # a whole family set per dtype
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.splitlines()[-1].removeprefix("EMU-RESULT "))
    return report["failed"], report["total"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_legal_variants_pass_every_case(dtype):
    failed, total = _run(LEGAL, [dtype])
    assert set(total) == set(OPS) and sum(failed.values()) == 0, failed


@pytest.mark.parametrize("group", sorted(BIASED))
@pytest.mark.parametrize(("dtype", "bias"), [("bfloat16", 0.005), ("float16", 0.005), ("float32", 1e-4)])
def test_biased_variants_fail_in_every_family(dtype, bias, group):
    ops = NORMS if group == "norms" else [op for op in OPS if op not in NORMS]
    failed, total = _run({op: f"bias:{bias}" for op in BIASED[group]}, [dtype], ops)
    assert set(total) == set(ops) and all(failed.get(op, 0) > 0 for op in ops), failed


@pytest.mark.parametrize(("numerics", "message"), [
    ({"gelu": "bias:0.01"}, "numerics['gelu']: no numeric variants for 'gelu'"),
    ({"mm": "stored_partials"}, "numerics['mm']: 'stored_partials' is not a variant of mm (use split_k or bias:F)"),
    ({"cumsum": "bias:lots"}, "numerics['cumsum']: 'bias:lots' needs a fraction between -0.5 and 0.5"),
    ({"rsqrt": "split_k"}, "numerics['rsqrt']: 'split_k' is not a variant of rsqrt (use bias:F)"),
    (["mm"], "numerics: must be a mapping of op name to variant"),
])
def test_a_bad_numerics_entry_names_itself(numerics, message):
    with pytest.raises(SpecError) as raised:
        parse_spec({"devices": DEVICE, "numerics": numerics})
    assert str(raised.value).startswith(message)
