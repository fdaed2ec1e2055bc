"""`bringup tune` on one model: start-up measured several times, the timings combined (their medians, and their
spread across the runs as the machine's noise), and the plan those combined timings give, as the record a later
start-up replays."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone

from bringup import __version__
from bringup.profiles.sections.models import ModelPlanRecord
from bringup.runner.engine.engine import LLMEngine
from bringup.runner.engine.options import EngineOptions
from bringup.runner.plan.host_kernels import paged_decode_verdict
from bringup.runner.plan.layout import time_layouts
from bringup.runner.plan.measurements import StartupMeasurements
from bringup.runner.plan.quantize.scheme import check_requested
from bringup.runner.plan.record.recorded import model_key, plan_record
from bringup.runner.plan.record.tune_runs import combine

RUNS = 3


def tune(options: EngineOptions, runs: int = RUNS, on_run: Callable[[int], None] | None = None
         ) -> tuple[LLMEngine, str, ModelPlanRecord]:
    """(the engine on the combined plan, the record's key, the record). Each run is a full start-up that times
    everything afresh (no record is replayed); the last start replays the combined timings, as later starts will."""
    measured: list[StartupMeasurements] = []
    for run in range(runs):
        time_layouts.cache_clear()  # each run times afresh: these keep one process's first answer
        paged_decode_verdict.cache_clear()
        LLMEngine.create(replace(options, use_record=False, on_measured=measured.append))
        if on_run is not None:
            on_run(run + 1)
    combined, noise = combine(measured)
    engine = LLMEngine.create(replace(options, use_record=False, measurements=combined))
    tuned = datetime.now(timezone.utc).isoformat(timespec="seconds")
    quantization = check_requested(options.quantization)
    record = plan_record(combined, engine.plan, engine.model_name, options.model_dir, engine.model_fingerprint, tuned,
                         __version__, runs, noise, quantization)
    return engine, model_key(engine.model_name, engine.model_fingerprint, quantization), record
