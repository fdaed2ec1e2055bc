"""Replicas: one engine per device, each holding the whole model, and a router above them (router.py)."""
