"""Checks that misbehave for real, injected into the probe through BRINGUP_EXTRA_PROBE_CHECKS."""

import os
import time

import torch


def hangs(device: torch.device) -> dict:
    time.sleep(600)
    return {"status": "supported", "evidence": "never reached"}


def aborts(device: torch.device) -> dict:
    os.abort()


def raises(device: torch.device) -> dict:
    raise RuntimeError("driver said no")


def fine(device: torch.device) -> dict:
    return {"status": "supported", "evidence": f"ran on {device}"}
