"""The execution plan: every choice the executor follows, with the evidence that made it.

Reading order: plan.py (`ExecutionPlan`, the draft from the profile, read through profile_facts.py; plain data, no
torch) → measurements.py (what is timed on the device before loading: layout.py's weight layouts, the paged decode
verdict, free memory) → host_kernels.py (every host-kernel choice, with its evidence) → kv_sizing.py → confirm.py
(the draft's workload-dependent choices kept or dropped on the served model's decode steps; the batch limit at the
knee). engine/startup/pipeline.py runs them in order; the plan is built once, then frozen.
"""
