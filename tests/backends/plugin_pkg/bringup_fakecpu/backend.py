"""The fakecpu family: really the host CPU (torch device type "cpu"), registered under another name through the
`bringup.backends` entry-point group. Every tensor it touches is a real CPU tensor, and its device record says so.

It supplies two attention implementations in the runner's calling convention: `fakecpu_attention` (correct:
float32 masked softmax) and `fakecpu_broken` (drops the mask, a real wrong answer), so a test can see the probe
verify one, reject the other, and the plan choose only the verified one."""

from pathlib import Path

import torch

from bringup.backends.base import AttentionFn, DeviceInfo
from bringup.backends.cpu import CpuBackend

SAYS = "fakecpu plugin: this is the host CPU under another family name (bringup's plugin test)"


def fakecpu_attention(q, k, v, mask, scale, softcap=None):  # type: ignore[no-untyped-def]
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v.float()).to(q.dtype)


def fakecpu_broken(q, k, v, mask, scale, softcap=None):  # type: ignore[no-untyped-def]
    return fakecpu_attention(q, k, v, None, scale, softcap)


class FakeCpuBackend(CpuBackend):
    family = "fakecpu"
    torch_device_type = "cpu"
    peaks_file = Path(__file__).with_name("peaks.yaml")

    def device_info(self, index: int) -> DeviceInfo:
        info = super().device_info(index)
        info.extra["plugin"] = SAYS
        return info

    def attention_implementations(self) -> dict[str, AttentionFn]:
        return {"fakecpu_attention": fakecpu_attention, "fakecpu_broken": fakecpu_broken}
