"""Host kernels check what they are handed before a raw pointer reaches C++: a clear error, never a crash."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest
import torch

from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.host import paged_decode
from bringup.runner.host.paged_decode import DecodeAttention
from bringup.runner.sampling_params import SamplingParams
from bringup.runner.weights.kernels import panels as panel_kernel
from bringup.runner.weights.kernels.build import HostKernelInputError
from tests.runner.host_compiler import needs_compiler

HEADS, KV_HEADS, HEAD_DIM, BATCH, LENGTH, SLOTS = 12, 4, 64, 3, 20, 64
DecodeArgs = dict[str, torch.Tensor]


@pytest.fixture
def no_kernel_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard tests show that every guard raises before the library is loaded: no compiler is needed."""

    def refuse() -> None:
        raise AssertionError("the kernel library was loaded before the inputs were checked")

    monkeypatch.setattr(paged_decode, "library", refuse)
    monkeypatch.setattr(panel_kernel, "library", refuse)


def _decode_args() -> DecodeArgs:
    names = ("q", "k_cache", "v_cache", "context_slots", "context_lens")
    values = paged_decode._case(HEADS, KV_HEADS, HEAD_DIM, BATCH, LENGTH, SLOTS, seed=0, device=torch.device("cpu"))
    return dict(zip(names, values))


def _with_slot(args: DecodeArgs, value: int) -> DecodeArgs:
    args["context_slots"][1, args["context_lens"][1] - 1] = value  # the last slot row 1 reads
    return args


def _with_len(args: DecodeArgs, value: int) -> DecodeArgs:
    args["context_lens"][2] = value
    return args


def _non_contiguous(t: torch.Tensor) -> torch.Tensor:
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)  # same values, column-major


BAD_DECODE_INPUTS: dict[str, tuple[Callable[[DecodeArgs], DecodeArgs], str]] = {
    "bfloat16 q": (lambda a: {**a, "q": a["q"].bfloat16()},
                   r"k_cache is torch\.float32 but q is torch\.bfloat16; the kernel reads one dtype for both"),
    "float16 q": (lambda a: {**a, "q": a["q"].half()}, r"q is torch\.float16; the kernel reads torch\.float32"),
    "float16 k_cache": (lambda a: {**a, "k_cache": a["k_cache"].half()},
                        r"k_cache is torch\.float16; the kernel reads torch\.float32"),
    "float64 v_cache": (lambda a: {**a, "v_cache": a["v_cache"].double()},
                        r"v_cache is torch\.float64; the kernel reads torch\.float32"),
    "int32 context_slots": (lambda a: {**a, "context_slots": a["context_slots"].int()},
                            r"context_slots is torch\.int32; the kernel reads torch\.int64"),
    "int32 context_lens": (lambda a: {**a, "context_lens": a["context_lens"].int()},
                           r"context_lens is torch\.int32; the kernel reads torch\.int64"),
    "q on meta": (lambda a: {**a, "q": a["q"].to("meta")}, r"q is on meta; a host kernel reads host \(cpu\) memory"),
    "k_cache on meta": (lambda a: {**a, "k_cache": a["k_cache"].to("meta")}, r"k_cache is on meta"),
    "sparse context_lens": (lambda a: {**a, "context_lens": a["context_lens"].to_sparse()},
                            r"context_lens has layout torch\.sparse_coo"),
    "non-contiguous k_cache": (lambda a: {**a, "k_cache": _non_contiguous(a["k_cache"])},
                               r"k_cache is not contiguous \(strides \[4096, 1, 64\]\)"),
    "non-contiguous v_cache": (lambda a: {**a, "v_cache": _non_contiguous(a["v_cache"])}, r"v_cache is not contiguous"),
    "2-D q": (lambda a: {**a, "q": a["q"].flatten(1)}, r"q has shape \[3, 768\]; expected 3 dimensions"),
    "2-D context_lens": (lambda a: {**a, "context_lens": a["context_lens"].view(1, -1)},
                         r"context_lens has shape \[1, 3\]; expected 1 dimensions"),
    "v_cache of another shape": (lambda a: {**a, "v_cache": a["v_cache"][:, :32].contiguous()},
                                 r"v_cache has shape \[4, 32, 64\]; expected the k_cache shape \[4, 64, 64\]"),
    "mismatched head_dim": (lambda a: {**a, "q": torch.randn(BATCH, HEADS, 32)},
                            r"q has head_dim 32 but the caches have head_dim 64"),
    "heads not a multiple of kv heads": (lambda a: {**a, "q": torch.randn(BATCH, 10, HEAD_DIM)},
                                         r"q has 10 heads, not a multiple of the caches' 4 kv heads"),
    "no kv heads": (lambda a: {**a, "k_cache": torch.empty(0, SLOTS, HEAD_DIM),
                               "v_cache": torch.empty(0, SLOTS, HEAD_DIM)},
                    r"q has 12 heads, not a multiple of the caches' 0 kv heads"),
    "context_slots rows != batch": (lambda a: {**a, "context_slots": a["context_slots"][:2]},
                                    r"context_slots has 2 rows for 3 queries in q"),
    "context_lens count != batch": (lambda a: {**a, "context_lens": a["context_lens"][:2]},
                                    r"context_lens has 2 lengths for 3 queries in q"),
    "context_len > L": (lambda a: _with_len(a, LENGTH + 1),
                        r"context_lens holds lengths \d+\.\.21; each must be in \[1, 20\] "
                        r"\(context_slots has 20 columns\)"),
    "context_len 0": (lambda a: _with_len(a, 0), r"context_lens holds lengths 0\.\.\d+; each must be in \[1, 20\]"),
    "slot == S": (lambda a: _with_slot(a, SLOTS), r"context_slots row 1 reads slot 64; slots must be in \[0, 64\)"),
    "negative slot": (lambda a: _with_slot(a, -1), r"context_slots row 1 reads slot -1; slots must be in \[0, 64\)"),
}


@pytest.mark.parametrize("case", list(BAD_DECODE_INPUTS))
@pytest.mark.usefixtures("no_kernel_library")
def test_paged_decode_refuses_what_it_cannot_read_safely(case):
    make_bad, message = BAD_DECODE_INPUTS[case]
    with pytest.raises(HostKernelInputError, match=message):
        paged_decode.run(**make_bad(_decode_args()), scale=0.125)


@pytest.mark.usefixtures("no_kernel_library")
def test_the_guard_error_is_a_value_error_on_one_line():
    with pytest.raises(ValueError) as caught:
        paged_decode.run(**BAD_DECODE_INPUTS["slot == S"][0](_decode_args()), scale=0.125)
    assert "\n" not in str(caught.value)


def test_slots_past_each_context_length_are_not_read_so_not_checked():
    args = _decode_args()
    args["context_lens"][:] = torch.tensor([1, 7, LENGTH])
    args["context_slots"][0, 1:] = -5  # padding: never read
    args["context_slots"][1, 7:] = 10**9
    paged_decode.check_inputs(**args)


def test_the_original_crash_bfloat16_into_paged_decode_runs_its_own_entry_or_is_refused(tmp_path):
    """On an Intel host bfloat16 tensors forced onto the float32 kernel read past its buffers and aborted the
    process; now bfloat16 throughout runs the bfloat16 entry point, and bfloat16 queries beside float32 caches are
    refused. In a child process, so that a regression fails this test instead of killing the run."""
    script = textwrap.dedent("""
        import torch
        from bringup.runner.host import paged_decode
        from bringup.runner.weights.kernels.build import HostKernelInputError
        args = paged_decode._case(8, 4, 32, 5, 130, 256, 0, torch.device("cpu"))
        q, k, v = (t.to(torch.bfloat16) for t in args[:3])
        got = paged_decode.run(q, k, v, args[3], args[4], 32**-0.5)
        want = paged_decode.gather_reference(q, k, v, args[3], args[4], 32**-0.5)
        print("difference:", float((got.float() - want.float()).abs().max() / want.float().abs().max()))
        try:
            paged_decode.run(q, *args[1:3], args[3], args[4], 32**-0.5)
        except HostKernelInputError as exc:
            print("refused:", exc)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    difference = float(done.stdout.split("difference:")[1].split()[0])
    assert difference <= 2**-6  # rounded where the bfloat16 gather path rounds: a step apart at most
    assert "refused: k_cache is torch.float32 but q is torch.bfloat16; the kernel reads one dtype for both" \
        in done.stdout


def _panel_args() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return {"x": torch.randn(3, 72, generator=gen), "panels": panel_kernel.pack(torch.randn(40, 72, generator=gen)),
            "bias": torch.randn(48, generator=gen)}


BAD_PANEL_INPUTS: dict[str, tuple[Callable[[dict], dict], str]] = {
    "float16 x": (lambda a: {**a, "x": a["x"].half()},
                  r"x is torch\.float16; the kernel reads torch\.float32 or torch\.bfloat16 only"),
    "bfloat16 x, float32 panels": (lambda a: {**a, "x": a["x"].bfloat16()},
                                   r"panels is torch\.float32; the kernel reads torch\.bfloat16 only"),
    "x on meta": (lambda a: {**a, "x": a["x"].to("meta")}, r"x is on meta; a host kernel reads host \(cpu\) memory"),
    "1-D x": (lambda a: {**a, "x": a["x"][0]}, r"x has shape \[72\]; expected 2 dimensions"),
    "float64 panels": (lambda a: {**a, "panels": a["panels"].double()},
                       r"panels is torch\.float64; the kernel reads torch\.float32"),
    "panels on meta": (lambda a: {**a, "panels": a["panels"].to("meta")}, r"panels is on meta"),
    "non-contiguous panels": (lambda a: {**a, "panels": _non_contiguous(a["panels"])}, r"panels is not contiguous"),
    "panels not 16 wide": (lambda a: {**a, "panels": a["panels"].reshape(6, 72, 8)},
                           r"panels has shape \[6, 72, 8\]; expected \[num_panels, k, 16\]"),
    "x rows shorter than k": (lambda a: {**a, "x": a["x"][:, :64]},
                              r"x has 64 features per row but the packed weight has k=72"),
    "float16 bias": (lambda a: {**a, "bias": a["bias"].half()},
                     r"bias is torch\.float16; the kernel reads torch\.float32"),
    "non-contiguous bias": (lambda a: {**a, "bias": torch.randn(96)[::2]}, r"bias is not contiguous \(strides \[2\]\)"),
    "bias of 40 for 48 columns": (lambda a: {**a, "bias": a["bias"][:40]},
                                  r"bias has 40 values for 48 panel columns; pad it like the weight"),
}


@pytest.mark.parametrize("case", list(BAD_PANEL_INPUTS))
@pytest.mark.usefixtures("no_kernel_library")
def test_panel_linear_refuses_what_it_cannot_read_safely(case):
    make_bad, message = BAD_PANEL_INPUTS[case]
    with pytest.raises(HostKernelInputError, match=message):
        panel_kernel.run(**make_bad(_panel_args()))


@pytest.mark.parametrize(("weight", "message"), [
    (torch.ones(4, 16, 8), r"w has shape \[4, 16, 8\]; expected 2 dimensions"),
    (torch.ones(16, 8, dtype=torch.float16),
     r"w is torch\.float16; the kernel reads torch\.float32 or torch\.bfloat16"),
])
@pytest.mark.usefixtures("no_kernel_library")
def test_pack_refuses_weights_the_kernel_cannot_use(weight, message):
    with pytest.raises(HostKernelInputError, match=message):
        panel_kernel.pack(weight)


GREEDY = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
PROMPTS = ["guarded", "a longer prompt for a ragged decode batch"]


def _tokens(engine: LLMEngine) -> list[list[int]]:
    return [o.token_ids for o in engine.generate([engine.tokenizer.encode(p) for p in PROMPTS], GREEDY)]


def test_a_guard_error_at_run_time_is_an_op_fallback_to_the_gather_path(monkeypatch, bringup_logs):
    def engine() -> LLMEngine:
        e = LLMEngine.create(EngineOptions(device="cpu", max_model_len=64, max_num_seqs=2))
        e.executor.fused = None  # decode steps through the layers' attention, whatever start-up timing chose
        return e

    reference = engine()
    reference.executor.model.decode_attend = None
    want = _tokens(reference)
    guarded = engine()
    guarded.executor.model.decode_attend = DecodeAttention(guarded.fallbacks, instead="gather + matmul_softmax")
    checked_run = paged_decode.run

    def int32_lengths(q, k_cache, v_cache, context_slots, context_lens, scale):  # type: ignore[no-untyped-def]
        return checked_run(q, k_cache, v_cache, context_slots, context_lens.int(), scale)

    monkeypatch.setattr(paged_decode, "run", int32_lengths)
    assert _tokens(guarded) == want
    assert guarded.stats()["fallbacks"]["op"] == 1
    assert any("wanted paged_decode, using gather + matmul_softmax" in r.getMessage()
               and "HostKernelInputError: context_lens is torch.int32" in r.getMessage() for r in bringup_logs.records)


@needs_compiler
def test_what_the_model_passes_is_accepted_and_runs():
    """A q sliced out of the fused projection (not contiguous) and padding past the lengths that is not a slot."""
    args = _decode_args()
    args["context_lens"][:] = torch.tensor([LENGTH, 7, 13])
    fused = torch.randn(BATCH, 2 * HEADS, HEAD_DIM)
    fused[:, :HEADS] = args["q"]
    q = fused[:, :HEADS]
    assert not q.is_contiguous()
    padded = args["context_slots"].clone()
    padded[1, 7:] = -1
    with torch.inference_mode():
        got = paged_decode.run(q, args["k_cache"], args["v_cache"], padded, args["context_lens"], 0.125)
        want = paged_decode.gather_reference(*args.values(), 0.125)
    assert (got - want).abs().max().item() <= 1e-5
