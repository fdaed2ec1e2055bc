"""Placement across several devices: one planner fed only by each device's profile figures and the model's size
(docs/runner.md, "Placement across devices"). It never reads a device's name: the ids are labels."""
