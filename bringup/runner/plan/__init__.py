"""The execution plan: every choice the executor follows, with the evidence that made it.

Reading order: startup.py (the order of things at engine start) → plan.py (`ExecutionPlan`, the draft from the
profile, read through profile_facts.py) → measurements.py (what is timed on the device before loading:
layout.py's weight layouts, the paged decode verdict, free memory) → kv_sizing.py → confirm.py (the draft's
workload-dependent choices timed on the served model's decode steps; the batch limit at the knee). Built once,
then frozen.
"""
