"""`bringup bench`: a trustworthy timing harness and baseline microbenchmarks.

How a number is made
- harness.py: warm-up calls, then calibrate calls per timed block (so a block lasts at least
  `min_rep_s`), then time blocks — each bracketed by the backend's synchronize (never a
  vendor-specific call) — until IQR/median <= threshold ("stable"), the time budget runs out
  ("budget"), or max_reps. A result whose IQR/median stays above the threshold is flagged noisy.
  With --flush-cache a buffer of 2x the last-level cache (cache.py) is read and written before
  every block, and each block holds one call. benchmarks/harness_vs_timer.py checks the medians
  against torch.utils.benchmark.Timer.adaptive_autorange.
- accounting.py: FLOPs and minimum bytes per kernel from shapes (BabelStream byte counting).
- groups/: one module per group — matmul, bandwidth, transfer, dispatch, attention, ops, compiled.
  Sizes come from the preset (presets.py) and are skipped, with the reason, when they would not fit
  a share of free device memory or would take longer per call than the preset allows (sizing.py).
- roofline.py: % of the attainable ceiling, against datasheet peaks (profiles/peaks.yaml) and the
  ceilings this run measured.
- stage.py: group selection, the run, and the merge into the profile's `bench` section;
  profiles/bench_diff.py compares two sections with noise-aware significance.
"""
