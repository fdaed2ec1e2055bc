"""The quantization steps. auto_quantize (with --quantization auto, after the warm-up): each candidate scheme
measured against the unquantized weights on the model itself, the winner kept (quantization and weight_layout rows).
compare_unquantized (before graphs are captured, so both sides run eager): the served plan's decode steps against
the unquantized plan's, in the quantization row; when auto's choice did not beat it, the choice is withdrawn, the
pass stops there and pipeline.py serves a second pass with none."""

from __future__ import annotations

from bringup.backends.host import is_host
from bringup.runner.engine.auto_quantization.held_candidates import load_held_candidates
from bringup.runner.engine.auto_quantization.held_device import load_held_device_kinds
from bringup.runner.engine.auto_quantization.measure import auto_quantization
from bringup.runner.engine.quantized_activations import versus_unquantized
from bringup.runner.engine.startup.context import Start
from bringup.runner.plan.plan import ExecutionPlan
from bringup.runner.plan.quantize.scheme import AUTO, auto_candidates


def auto_quantize(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    """With `auto`: the plan with the scheme chosen on the model (or none, saying why), the model serving it."""
    inputs, bench = start.inputs, start.bench
    if bench.quantization != AUTO:
        return plan
    model, executor = bench.model, bench.executor
    assert model is not None and executor is not None and bench.weights is not None
    if is_host(inputs.device):
        load_held_candidates(model, inputs.source, inputs.config, bench.dtype, bench.weights,
                             auto_candidates(inputs.device, inputs.config)[0])
    else:  # a device kind that maps the file's blocks (int4_pack) takes them from the file
        load_held_device_kinds(model, inputs.source, inputs.config, bench.dtype, bench.weights, bench.profile)
    plan = auto_quantization(executor, inputs.tokenizer, plan, bench.weights, bench.profile)
    model.use_layout(model.layout)  # frees a file's blocks loaded for a scheme auto did not keep
    return plan


def compare_unquantized(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    """The plan with its quantization row compared with the unquantized plan; the bench's `withdrawn` row when
    auto's scheme lost."""
    inputs, bench = start.inputs, start.bench
    assert bench.executor is not None
    plan, bench.withdrawn = versus_unquantized(plan, bench.executor, inputs.source, bench.quantization, bench.asked,
                                               inputs.options.measurements, bench.record is not None)
    return plan
