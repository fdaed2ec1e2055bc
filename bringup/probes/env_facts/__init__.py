"""The facts behind the `environment` section and `bringup env`, one topic per module; every probe is bounded."""
