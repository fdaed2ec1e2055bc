import json

from bringup.probes.ops.catalog import load_catalog, select_cases
from bringup.probes.ops.inputs import generator
from tests.cli.run_cli import run_cli

REQUIRED = {
    "matmul", "linear", "bmm", "addmm", "baddbmm", "_int_mm", "_scaled_mm", "softmax", "log_softmax",
    "layer_norm", "rms_norm", "gelu", "silu", "relu", "sigmoid", "tanh", "exp", "log", "rsqrt", "sqrt", "pow",
    "reciprocal", "add", "sub", "mul", "div", "where", "clamp", "masked_fill", "tril", "triu", "sum", "mean",
    "amax", "argmax", "var", "cumsum", "topk", "sort", "multinomial", "embedding", "index_select", "gather",
    "scatter", "index_copy", "index_put", "cat", "stack", "transpose_contiguous", "repeat_interleave", "cast",
    "rotary", "sdpa_math", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn",
    "moe_router", "moe_group_tokens", "index_add", "scatter_add", "grouped_matmul", "sliding_window_mask",
    "tanh_softcap",
}


def _shapes(case, name):
    args = case.inputs(generator(name, case.label))
    if case.layout is not None:
        args = case.layout(args)
    return [a for a in args if hasattr(a, "shape")]


def test_catalog_covers_the_issue_list_with_varied_cases():
    catalog = load_catalog()
    assert len(catalog.ops) >= 45
    assert set(catalog.ops) >= REQUIRED
    kinds = {"long": 0, "empty": 0, "noncontig": 0, "odd": 0, "broadcast": 0}
    for name, spec in catalog.ops.items():
        if name != "_scaled_mm":
            assert len(spec.cases) >= 3, name
        for case in spec.cases:
            tensors = _shapes(case, name)
            if any(t.numel() == 0 for t in tensors):
                kinds["empty"] += 1
            if any(not t.is_contiguous() for t in tensors):
                kinds["noncontig"] += 1
            if any(any(s % 8 and s > 8 for s in t.shape) for t in tensors):
                kinds["odd"] += 1
            if case.accum >= 8192 or any(t.numel() >= 8192 and t.dim() == 1 for t in tensors):
                kinds["long"] += 1
            if len({t.dim() for t in tensors if t.is_floating_point()}) > 1:
                kinds["broadcast"] += 1
    assert all(count >= 20 for count in kinds.values()), kinds


def test_filters_and_list():
    catalog = load_catalog()
    keys = select_cases(catalog, ["softmax"], ["bfloat16"], "long")
    assert [str(k) for k in keys] == ["softmax[bfloat16] long [2,16384] dim=-1"]
    listed = run_cli(["verify-ops", "--list", "--json"])
    assert listed.code == 0
    doc = json.loads(listed.stdout)
    assert {row["op"] for row in doc["ops"]} >= REQUIRED
    assert doc["tolerances"]["bfloat16"]["reason"]
    text = run_cli(["verify-ops", "--list"])
    assert text.code == 0 and "softmax" in text.stdout and "rms_norm_linear" in text.stdout


def test_bad_filters_are_one_line_usage_errors(tmp_path):
    for args, words in ((["--op", "softmaxx"], "unknown op(s) softmaxx"), (["--dtype", "float7"], "unknown dtype"),
                        (["-k", "("], "not a valid regular expression"), (["-k", "nothing-matches-this"], "no cases"),
                        (["--compiled", "--compile-backend", "nonsense"], "not a torch.compile backend"),
                        (["--op", "swiglu_mlp"], "compared only with --compiled")):
        result = run_cli(["verify-ops", "--profile", str(tmp_path / "p.yaml"), *args])
        assert result.code == 2, result
        assert words in result.stderr and "Traceback" not in result.stderr


def test_unimportable_plugin_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.setenv("BRINGUP_OPS_PLUGINS", "no_such_module_for_bringup")
    result = run_cli(["verify-ops", "--list"])
    assert result.code == 2 and "no_such_module_for_bringup" in result.stderr
