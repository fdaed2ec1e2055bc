"""bringup fleet: the stages on every rank's own device through torch.distributed, and the outliers named.

Layout (one concept per module):
  options.py    what a fleet run does (stages, folder, thresholds), passed to every rank as JSON
  faults.py     test/diagnostic per-rank fault injection (BRINGUP_FLEET_FAULTS)
  naming.py     one profile file per host, device and rank
  stages.py     one rank's stages: the ordinary stage commands in-process, into the rank's own profile
  quick_bench.py  the fleet's bench: two figures, measured by one rank at a time
  links.py      per-link send/recv bandwidth, one link at a time
  rank.py       the per-rank entry point (local ranks and torchrun alike): stages, then the gather
  gather.py     every rank's summary to rank 0 through gather_object
  summary.py    a rank's key figures and verdicts, from its profile (plain data)
  outliers.py   pure functions: MAD thresholds, majority verdicts, differing facts
  launch.py     local ranks through the collectives launcher, or this process's share of a torchrun world
  result.py     the fleet's result (ranks, outliers, faults) and fleet.json
"""
