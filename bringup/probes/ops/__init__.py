"""verify-ops: operator-by-operator validation against a float64 CPU reference.

Layout (one concept per module):
  spec.py         OpSpec / CaseSpec / CaseKey: the declarative shape of the catalog
  catalog*.py     the ops and their cases (catalog.py assembles them, plus plugins)
  inputs.py       seeded CPU inputs, cast to the dtype under test, moved to the device
  tolerances.py   the one per-dtype tolerance table, with reasons, and accumulation scaling
  metrics.py      max abs / max rel / NMSE / worst index and the pass verdict
  guard.py        sentinel guard regions around out= results
  statistics.py   chi-square judgement for multinomial
  execute.py      one case, in-process
  worker.py       crash isolation: a long-lived worker subprocess fed over a pipe
  runner.py       the task loop and the checkpointer
  stage.py        planning, --resume, merging into the profile, the summary

Environment hooks (for tests and extensions, not for users):
  BRINGUP_OPS_PLUGINS  comma-separated modules imported by the CLI and every worker; a module may
                       define ops() -> list[OpSpec] and may register compile backends or kernels.
  BRINGUP_OPS_TRACE    a file to which every executed case is appended (proves "no case twice").
"""
