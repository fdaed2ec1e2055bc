"""The MoE, sliding-window and soft-cap ops, and the exact tie contracts of argmax/max, sort and topk: they pass
on the CPU, and the contract cases fail when a kernel breaks a documented tie rule."""

import json

import pytest
import torch

from bringup.probes.ops.catalog import load_catalog, select_cases
from bringup.probes.ops.catalog.contracts import CONTRACT
from bringup.probes.ops.catalog.moe import group_tokens, route
from bringup.probes.ops.catalog.window import window_mask
from bringup.probes.ops.execute import run_case
from tests.cli.run_cli import run_cli
from tests.probes.ops import wrong_tie_kernels as wrong

NEW_OPS = ["moe_router", "moe_group_tokens", "index_add", "scatter_add", "grouped_matmul", "sliding_window_mask",
           "tanh_softcap"]


def _run_cases(ops, pattern=None):
    catalog = load_catalog()
    return [run_case(key, catalog, torch.device("cpu")) for key in select_cases(catalog, ops, ["float32"], pattern)]


def test_new_ops_are_in_the_catalog_and_pass_on_cpu_float32():
    records = _run_cases(NEW_OPS)
    assert {r.op for r in records} == set(NEW_OPS)
    assert [f"{r.op} {r.case}: {r.message}" for r in records if r.status != "pass"] == []
    labels = " | ".join(r.case for r in records)
    assert "renormalised" in labels and "not renormalised" in labels  # the router with and without
    assert "loop of matmuls" in labels and "padded bmm" in labels and "empty groups=" in labels


def test_contract_cases_pass_on_cpu():
    records = _run_cases(["argmax", "sort", "topk"], pattern=CONTRACT)
    assert len(records) == 9 and {r.op for r in records} == {"argmax", "sort", "topk"}
    assert all(r.status == "pass" for r in records), [(r.case, r.message) for r in records]


def test_the_pieces_compute_what_models_compute():
    # window: query p sees keys (p - window, p]; the last 2 queries of 6 positions, window 3
    assert window_mask(2, 6, 3, torch.device("cpu")).int().tolist() == [[0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1]]
    # grouping: stable by expert, counts, the token each slot reads
    ids = torch.tensor([[2, 0], [0, 2], [1, 0]])
    order, counts, token_of_slot, rows = group_tokens(ids, torch.arange(3.0)[:, None], 4)
    assert order.tolist() == [1, 2, 5, 4, 0, 3] and counts.tolist() == [3, 1, 2, 0]
    assert token_of_slot.tolist() == [0, 1, 2, 2, 0, 1] and rows.flatten().tolist() == [0, 1, 2, 2, 0, 1]
    # router: top-k of the softmax, renormalised weights sum to 1
    weights, chosen = route(torch.tensor([[1.0, 0.5, 0.0]]), torch.eye(3), 2, True)
    assert chosen.tolist() == [[0, 1]] and float(weights.sum()) == pytest.approx(1.0)


def _verify(tmp_path, op, *pattern):
    result = run_cli(["verify-ops", "--no-isolate", "--json", "--dtype", "float32", "--op", op,
                      "--profile", str(tmp_path / "p.yaml"), *pattern])
    return result, {c["case"]: c for c in json.loads(result.stdout)["cases"]}


def _failing(cases):
    return {label for label, c in cases.items() if c["status"] != "pass"}


def test_argmax_returning_the_last_tie_fails_only_the_contract_cases(tmp_path, override_cpu_kernel):
    override_cpu_kernel("argmax", wrong.argmax_last_on_ties)
    override_cpu_kernel("max.dim", wrong.max_dim_last_on_ties)
    result, cases = _verify(tmp_path, "argmax")
    assert result.code == 1
    contract = {label for label in cases if label.startswith(CONTRACT)}
    assert len(contract) == 4 and _failing(cases) == contract
    assert all(cases[label]["status"] == "fail" and "differ (exact result expected)" in cases[label]["message"]
               for label in contract)
    # the tie-robust cases (value at the returned index) cannot see the rule broken: they pass
    assert cases["ties [8,1000]"]["status"] == "pass"


def test_unstable_tie_order_fails_the_stable_sort_contract(tmp_path, override_cpu_kernel):
    override_cpu_kernel("sort.stable", wrong.sort_ties_reversed)
    result, cases = _verify(tmp_path, "sort", "-k", "stable|ascending odd")
    assert result.code == 1
    contract = {label for label in cases if label.startswith(CONTRACT)}
    assert len(contract) == 3 and contract <= _failing(cases)
    assert cases["ascending odd [37,131]"]["status"] == "pass"  # no ties there: the kernel is right


def test_topk_out_of_order_fails_the_sorted_contract(tmp_path, override_cpu_kernel):
    override_cpu_kernel("topk", wrong.topk_ascending)
    result, cases = _verify(tmp_path, "topk", "-k", "contract")
    assert result.code == 1 and len(cases) == 2
    assert _failing(cases) == set(cases)
    for case in cases.values():  # outputs: values, input at indices, descending flag, distinct flag
        assert "output 2:" in case["message"] and "output 3:" not in case["message"]


def test_reproducers_of_new_and_contract_cases_run_standalone(tmp_path):
    import subprocess
    import sys

    from bringup.probes.ops.repro import write_reproducer_dir
    from bringup.profiles.sections.ops import OpCaseRecord

    labels = {"moe_router": "renormalised [37,72] [8,72] top=2",
              "argmax": f"{CONTRACT}first maximal index on ties [8,1000] integers below=8"}
    records = [OpCaseRecord(op=op, dtype="float32", case=label, status="fail", message="injected")
               for op, label in labels.items()]
    repro = write_reproducer_dir(records, tmp_path / "repro", "cpu")
    files = sorted((tmp_path / "repro").glob("*.py"))
    assert len(files) == 2, repro.line()
    for path in files:  # neither case has an out= variant: the file must still define what its run calls
        run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0 and "PASS" in run.stdout, run.stdout + run.stderr
