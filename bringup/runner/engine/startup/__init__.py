"""Engine start-up as a pipeline: the device chosen (and the global fallback), then the plan derived from the profile,
model and options and passed through the steps of pipeline.py in order, each adding its settings and their evidence;
the engine serves the final plan. Reading order: device.py → pipeline.py → the step modules in the order it lists."""

from bringup.runner.engine.startup.device import start_engine

__all__ = ["start_engine"]
