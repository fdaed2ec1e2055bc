"""verify-ops: operator-by-operator validation against a float64 CPU reference.

Layout (one concept per module):
  spec.py         OpSpec / CaseSpec / CaseKey: the declarative shape of the catalog, case labels and identities
  catalog/        the ops and their cases (catalog/__init__.py assembles them, plus plugins)
  model_shapes.py a model's own shapes as extra cases (verify-ops --model)
  inputs.py       seeded CPU inputs, cast to the dtype under test, moved to the device
  judge/          tolerances.py (the one per-dtype tolerance table, with reasons, and accumulation scaling),
                  metrics.py (max abs / max rel / NMSE / worst index and the pass verdict), statistics.py
                  (chi-square judgement for multinomial), error_kinds.py (a rejection or a malfunction)
  guard.py        sentinel guard regions around out= results
  execute.py      one case, in-process
  worker.py       crash isolation: a long-lived worker subprocess fed over a pipe
  runner.py       the task loop and the checkpointer
  stage.py        planning, --resume, merging into the profile, the summary
  compiled/       eager vs torch.compile against the float64 reference, failures bisected
  repro/          a failing case as a standalone script, proven faithful (repro/check.py)

Environment hooks (for tests and extensions, not for users):
  BRINGUP_OPS_PLUGINS  comma-separated modules imported by the CLI and every worker; a module may
                       define ops() -> list[OpSpec] and may register compile backends or kernels.
  BRINGUP_OPS_TRACE    a file to which every executed case is appended (proves "no case twice").
"""
