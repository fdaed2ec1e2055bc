"""Step 4, choose the weights: the weight layout (measured, forced by the caller, or the storage of the checkpoint's
or the requested quantization scheme) and the quantization row."""

from __future__ import annotations

from dataclasses import replace

from bringup.backends.host import is_host
from bringup.errors import BringupError
from bringup.runner.engine.startup.context import Start
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.plan.host_kernels import choose_layout
from bringup.runner.plan.plan import Choice, ExecutionPlan
from bringup.runner.plan.quantize.checkpoint import checkpoint_scheme
from bringup.runner.plan.quantize.device_scheme import device_origin, device_requested, record_converted
from bringup.runner.plan.quantize.held_blocks import none_choice, origin, record_requantized
from bringup.runner.plan.quantize.scheme import SCHEMES, requested_scheme
from bringup.runner.weights.kinds import IN_OUT, OUT_IN


def choose_weights(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    """The plan with its weight_layout and quantization rows; the bench's layout and the file's weight types."""
    inputs, bench = start.inputs, start.bench
    layout, layout_choice = _layout(start)
    bench.weights = weights = inputs.source.linear_weight_types()
    quantization, stored = bench.quantization, inputs.config.stored_quantization
    quantization_choice = inputs.withdrawn or none_choice(weights)
    if stored is not None:
        layout, layout_choice, quantization_choice = checkpoint_scheme(stored, quantization, inputs.device, layout,
                                                                       layout_choice)
    elif quantization in SCHEMES and not is_host(inputs.device):
        layout, quantization_choice = _on_device(start)
        layout_choice = Choice(layout.describe(), "the --quantization scheme's storage (see quantization)")
    elif quantization in SCHEMES:
        record_requantized(quantization, weights, inputs.recorder)  # the file against the request, before the kernel
        layout, quantization_choice = requested_scheme(quantization, inputs.device, inputs.config, inputs.recorder,
                                                       origin(quantization, weights))
        layout_choice = Choice(layout.describe(), "the --quantization scheme's storage (see quantization)")
    bench.layout = layout
    return replace(plan, weight_layout=layout_choice, quantization=quantization_choice)


def _on_device(start: Start) -> tuple[WeightLayout, Choice]:
    """--quantization on an accelerator: the kind its verified kernel reads, the file's blocks converted for it once
    at load where that kind does not hold them (a recorded fallback where another storage would)."""
    inputs, bench = start.inputs, start.bench
    scheme, weights = bench.quantization, bench.weights
    assert weights is not None
    layout, choice = device_requested(scheme, inputs.device, inputs.config, bench.profile, bench.dtype,
                                      lambda kind: device_origin(kind, weights))
    record_converted(layout.small, weights, inputs.recorder)
    return layout, choice


def _layout(start: Start) -> tuple[WeightLayout, Choice]:
    """The weight layout the measurements chose, or the one the caller forced."""
    forced, bench = start.inputs.options.weight_layout, start.bench
    if forced is None:
        assert bench.measured is not None
        return choose_layout(bench.facts, bench.measured.layouts, bench.dtype, start.inputs.config,
                             bench.measured.free_bytes)
    if forced in (IN_OUT, OUT_IN):
        return WeightLayout(forced, forced, 0), Choice(forced, "forced by the caller, not measured")
    raise BringupError(f"weight layout {forced!r} is not one of {IN_OUT}, {OUT_IN}")
