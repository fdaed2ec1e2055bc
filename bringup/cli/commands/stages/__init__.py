"""The staged commands that measure a device and write the profile: devices, probe, verify-ops,
verify-collectives, bench."""
