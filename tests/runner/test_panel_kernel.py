"""bringup's host panel kernel: exact enough against F.linear, honest about why it cannot run."""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from bringup.runner.model.decoder import WeightLayout
from bringup.runner.sources.builtin_model import load_builtin
from bringup.runner.weights.kernels import build as host_build
from bringup.runner.weights.kernels import panels as panel_kernel
from tests.runner.host_compiler import needs_compiler


@needs_compiler
@pytest.mark.parametrize("rows", [1, 2, 5, 6, 7, 12, 13])
@pytest.mark.parametrize("out_features", [48, 40])  # 40: the last panel is padded with zero columns
def test_matches_f_linear_for_any_row_count_and_width(rows, out_features):
    gen = torch.Generator().manual_seed(rows * 100 + out_features)
    w, x = torch.randn(out_features, 72, generator=gen), torch.randn(rows, 72, generator=gen)
    panels = panel_kernel.pack(w)
    assert panels.shape == (3, 72, 16)
    bias = torch.randn(48, generator=gen)
    got = panel_kernel.apply(x, panels, bias)
    assert got.shape == (rows, 48)
    want = F.linear(x, torch.cat([w, w.new_zeros(48 - out_features, 72)]), bias)
    assert (got - want).abs().max().item() <= 1e-5
    assert torch.equal(got[:, out_features:], bias[out_features:].expand(rows, -1))  # zero weights: bias only
    strided = torch.randn(rows, 144, generator=gen)[:, ::2]  # rows with a stride, not contiguous
    assert (panel_kernel.apply(strided, panels, None) - F.linear(strided, panels.transpose(1, 2).reshape(48, 72))
            ).abs().max().item() <= 1e-5


def test_a_bias_that_does_not_cover_the_padded_width_is_refused():
    panels = panel_kernel.pack(torch.ones(40, 8))
    with pytest.raises(ValueError, match="bias has 40 values for 48 panel columns"):
        panel_kernel.apply(torch.ones(1, 8), panels, torch.ones(40))


@needs_compiler
@pytest.mark.parametrize("rows", [1, 2, 7, 12, 13, 25])  # up to two full 12-row tiles and a remainder
@pytest.mark.parametrize("k", [200, 71])  # 71: the last input has no pair
def test_bfloat16_accumulates_in_float32_and_rounds_once(rows, k):
    assert_bfloat16_product_rounds_once(rows, k)


@needs_compiler
@pytest.mark.parametrize("rows", [2, 16, 17, 33, 64, 65, 130])  # AMX: one to four tiles of 16 rows per pass, 1-3 passes
def test_bfloat16_products_of_inputs_in_whole_tiles_round_once(rows):
    assert_bfloat16_product_rounds_once(rows, 96)  # 96 inputs: three AMX tiles of 32 where the CPU has AMX-BF16


def assert_bfloat16_product_rounds_once(rows: int, k: int) -> None:
    gen = torch.Generator().manual_seed(rows * 1000 + k)
    w, x = torch.randn(40, k, generator=gen).bfloat16(), torch.randn(rows, k, generator=gen).bfloat16()
    bias = torch.randn(48, generator=gen).bfloat16()
    got = panel_kernel.apply(x, panel_kernel.pack(w), bias)
    assert got.dtype == torch.bfloat16 and got.shape == (rows, 48)
    want = F.linear(x.float(), torch.cat([w, w.new_zeros(8, k)]).float(), bias.float())  # exact products
    assert ((got.float() - want).abs() <= want.abs() * 2**-8 + 1e-4).all()  # one bfloat16 rounding apart
    assert torch.equal(got[:, 40:], bias[40:].expand(rows, -1))


@pytest.mark.parametrize("k", [6, 7])
def test_bfloat16_panels_store_each_pair_of_inputs_side_by_side(k):
    """[k/2][16][2] per panel: word c of pair i holds column c's weights for inputs 2i and 2i + 1 (what one
    vdpbf16ps reads); an odd k's last input keeps its row of 16. unpack gives the weight back."""
    w = torch.arange(40 * k, dtype=torch.float32).reshape(40, k).bfloat16()  # exact: every value below 256
    panels = panel_kernel.pack(w)
    assert panels.shape == (3, k, 16)
    flat = panels.reshape(3, -1)
    for i in range(k // 2):
        row = flat[0, 32 * i: 32 * (i + 1)]
        assert torch.equal(row[0::2], w[:16, 2 * i]) and torch.equal(row[1::2], w[:16, 2 * i + 1])
    if k % 2:
        assert torch.equal(flat[2, -16:], torch.cat([w[32:, k - 1], w.new_zeros(8)]))
    assert torch.equal(panel_kernel.unpack(panels), torch.cat([w, w.new_zeros(8, k)]))
    assert torch.equal(panel_kernel.unpack(panel_kernel.pack(w.float())), torch.cat([w, w.new_zeros(8, k)]).float())


@needs_compiler
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="-mno-avx512bf16 is an x86 option")
def test_without_avx512_bf16_the_same_panels_are_widened_to_the_same_sums(tmp_path, monkeypatch):
    """The fallback that CPUs without AVX512-BF16 build (here forced with -mno-avx512bf16) reads the same layout."""
    gen = torch.Generator().manual_seed(3)
    w, x = torch.randn(48, 71, generator=gen).bfloat16(), torch.randn(3, 71, generator=gen).bfloat16()
    default = panel_kernel.apply(x, panel_kernel.pack(w), None)
    monkeypatch.setattr(host_build, "FLAGS", (*host_build.FLAGS, "-mno-avx512bf16"))
    monkeypatch.setenv("BRINGUP_KERNEL_CACHE", str(tmp_path))
    clear = [panel_kernel.library.cache_clear, host_build.load.cache_clear]
    for fn in clear:
        fn()
    try:
        for rows, k in ((1, 200), (2, 71), (13, 71)):
            assert_bfloat16_product_rounds_once(rows, k)
        widened = panel_kernel.apply(x, panel_kernel.pack(w), None)
        built = [p.name for p in tmp_path.iterdir()]
    finally:
        for fn in clear:
            fn()
    assert built and all(name.startswith("panel_linear-") for name in built)  # this test's own build was used
    assert ((widened.float() - default.float()).abs() <= default.float().abs() * 2**-7 + 1e-4).all()  # a rounding apart


@needs_compiler
@pytest.mark.skipif(shutil.which("objdump") is None, reason="no objdump to read the built library")
@pytest.mark.parametrize(("flag", "instructions"), [("avx512_bf16", ["vdpbf16ps"]),
                                                    ("amx_bf16", ["tdpbf16ps", "ldtilecfg", "tilerelease"])])
def test_where_the_cpu_has_bfloat16_dot_products_the_product_uses_them(flag, instructions):
    if flag not in host_build._cpu_signature().split():
        pytest.skip(f"this CPU has no {flag}")
    panel_kernel.library()
    path = host_build.library_path("panel_linear.cpp")
    listing = subprocess.run(["objdump", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    assert all(name in listing for name in instructions)


@needs_compiler
def test_bfloat16_keeps_nan_and_infinity():
    for k in (8, 32):  # 32: a whole AMX tile of inputs, where the CPU has AMX-BF16
        w = torch.ones(16, k).bfloat16()
        x = torch.tensor([[float("nan")] + [1.0] * (k - 1), [float("inf")] + [1.0] * (k - 1)]).bfloat16()
        got = panel_kernel.apply(x, panel_kernel.pack(w), None)
        assert got[0].isnan().all() and (got[1] == float("inf")).all()


@needs_compiler
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_check_passes_where_the_kernel_builds(dtype):
    assert panel_kernel.check(torch.device("cpu"), dtype) is None


def test_check_says_why_the_kernel_cannot_be_used():
    assert "not in host memory" in panel_kernel.check(torch.device("meta"), torch.float32)
    assert "built for float32 and bfloat16 only, not float16" in panel_kernel.check(torch.device("cpu"),
                                                                                  torch.float16)


def test_a_compiler_that_fails_makes_the_kernel_unavailable_with_its_reason(tmp_path, monkeypatch):
    failing = tmp_path / "bin" / "false"  # a real compiler invocation that fails, whatever the machine has
    failing.parent.mkdir()
    failing.write_text(f"#!{sys.executable}\nraise SystemExit(1)\n")
    failing.chmod(0o755)
    monkeypatch.setenv("CXX", str(failing))
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("BRINGUP_KERNEL_CACHE", str(cache))
    clear = [panel_kernel.library.cache_clear, host_build.load.cache_clear]
    for fn in clear:
        fn()
    try:
        why = panel_kernel.check(torch.device("cpu"), torch.float32)
    finally:
        for fn in clear:
            fn()
    assert why is not None and "false failed to build panel_linear.cpp" in why
    assert list(cache.iterdir()) == []  # no partial library left behind


@needs_compiler
def test_builtin_model_with_panels_matches_the_plain_layout():
    """The built-in vocabulary (264) is not a multiple of 16: the head is padded and the logits cut back."""
    plain, panels = (load_builtin(torch.float32, "cpu", WeightLayout(kind, kind)) for kind in ("out_in", "panels"))
    hidden = torch.randn(3, plain.config.hidden_size, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        want, got = plain.logits(hidden), panels.logits(hidden)
    assert got.shape == want.shape == (3, 264)
    assert (got - want).abs().max().item() <= 1e-4


@needs_compiler
def test_under_torch_compile_the_kernel_is_one_opaque_op(inductor_cache_dir):
    w, x = torch.randn(32, 24), torch.randn(3, 24)
    fn = torch.compile(lambda a, p: panel_kernel.apply(a, p, None).relu() * 2, fullgraph=True)
    assert (fn(x, panel_kernel.pack(w)) - F.linear(x, w).relu() * 2).abs().max().item() <= 1e-5


def test_a_panel_kernel_fault_at_run_time_is_an_op_fallback_to_f_linear(tmp_path, monkeypatch, bringup_logs):
    from bringup.errors import StrictFallbackError
    from bringup.runner.engine.engine import EngineOptions, LLMEngine
    from bringup.runner.sampling_params import SamplingParams
    from tests.runner.stated import layout_times, stated

    def engine(panels_faster: bool, strict: bool = False) -> LLMEngine:
        times = layout_times(in_out=2.0, out_in=2.0, panels=1.0) if panels_faster else None
        return LLMEngine.create(EngineOptions(device="cpu", profile_path=tmp_path / "absent.yaml", max_model_len=64,
                                              max_num_seqs=2, strict=strict, measurements=stated(times)))

    greedy = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
    prompts = [[5, 6, 7, 8], [9, 10]]
    want = [o.token_ids for o in engine(panels_faster=False).generate(prompts, greedy)]

    def broken(*args, **kwargs):
        raise RuntimeError("injected: the panel kernel faulted")

    monkeypatch.setattr(panel_kernel, "run", broken)
    faulty = engine(panels_faster=True)  # the fault surfaces at warm-up, before any request
    assert faulty.plan.weight_layout.value == "panels"
    assert faulty.executor.model.layout == WeightLayout("out_in", "out_in", 0)
    assert [o.token_ids for o in faulty.generate(prompts, greedy)] == want
    assert faulty.stats()["fallbacks"]["op"] == 1
    assert any("wanted panels, using out_in" in r.getMessage() and "injected" in r.getMessage()
               for r in bringup_logs.records)
    with pytest.raises(StrictFallbackError, match="panels"):
        engine(panels_faster=True, strict=True)


def test_a_fault_elsewhere_in_a_forward_is_not_taken_for_the_panel_kernels(tmp_path, monkeypatch) -> None:
    from bringup.runner.engine.engine import EngineOptions, LLMEngine
    from bringup.runner.sampling_params import SamplingParams
    from tests.runner.stated import layout_times, stated

    times = layout_times(in_out=2.0, out_in=2.0, panels=1.0)
    engine = LLMEngine.create(EngineOptions(device="cpu", profile_path=tmp_path / "absent.yaml", max_model_len=64,
                                            max_num_seqs=2, measurements=stated(times)))
    model = engine.executor.model
    assert model.layout == WeightLayout("panels", "panels", 0)

    def broken_head(*args, **kwargs):
        raise RuntimeError("injected: the output head faulted")

    monkeypatch.setattr(model, "logits", broken_head)
    with pytest.raises(RuntimeError, match="injected: the output head faulted"):
        engine.generate([[5, 6, 7, 8]], SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True))
    assert engine.stats()["fallbacks"]["op"] == 0  # no panels fallback recorded for a fault that was not theirs
    assert model.layout == WeightLayout("panels", "panels", 0)
