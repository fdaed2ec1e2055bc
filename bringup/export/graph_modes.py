"""The engines' graph settings from verify-ops' eager-against-replay records (runner/plan/graphs_evidence.py), each
citing the records it rests on: vLLM's CUDA-graph mode (`--compilation-config '{"cudagraph_mode": ...}'`; its
`--enforce-eager` turns graphs off with compilation, vllm.py) and llama.cpp's `GGML_CUDA_DISABLE_GRAPHS`.

vLLM's default mode captures the whole decode step (FULL_AND_PIECEWISE): left as it is only where the whole decode
step's replay passed; where only the blocks passed, PIECEWISE (the pieces between attention); otherwise NONE, saying
why (a replay computed wrong numbers, a capture refused an op, or nothing is recorded). llama.cpp's CUDA backend
captures its decode graph unless the variable is set: it is set where the decode step's replay is not verified.
"""

from __future__ import annotations

import json

from bringup.export.config import Omitted, Setting
from bringup.export.engine_spec import ExportInputs, Item
from bringup.export.evidence import is_host
from bringup.runner.plan.graphs_evidence import TO_VERIFY, ReplayVerdict, replay_verdict
from bringup.runner.plan.profile_facts import ProfileFacts

COMPILATION = "--compilation-config"
LLAMA_GRAPHS = "GGML_CUDA_DISABLE_GRAPHS"


def verdict(x: ExportInputs) -> ReplayVerdict:
    return replay_verdict(ProfileFacts(x.profile), x.dtype.value or "float32")


def vllm_graph_mode(x: ExportInputs, eager: Item) -> Item:
    """`--compilation-config '{"cudagraph_mode": ...}'`, or left out where `eager` (--enforce-eager) is set or the
    default mode is verified."""
    found = verdict(x)
    if isinstance(eager, Setting):
        return Omitted("flag", COMPILATION, "--enforce-eager already runs without graphs", found.lines)
    if found.passed and found.whole_step:
        return Omitted("flag", COMPILATION, f"not needed: vLLM's default graph mode (FULL_AND_PIECEWISE, the whole "
                                            f"decode step captured) rests on {found.evidence}", found.lines)
    if found.passed:
        return Setting("flag", COMPILATION, _mode("PIECEWISE"), f"graphs between the attention calls only: "
                       f"{found.evidence}, but the whole decode step's replay is not verified", found.lines)
    to_get = f" ({TO_VERIFY} to verify them)" if found.status == "unverified" else ""
    return Setting("flag", COMPILATION, _mode("NONE"), f"no graphs: {found.evidence}{to_get}", found.lines)


def llama_cpp_graphs(x: ExportInputs) -> Item:
    """GGML_CUDA_DISABLE_GRAPHS=1 where the decode step's replay is not verified on an accelerator (llama.cpp's CUDA
    and HIP backends read it; the others ignore it, so it is set by the evidence, not by the device's name)."""
    host = is_host(x.profile)
    if host is None:
        return Omitted("env", LLAMA_GRAPHS, "the profile has no device section", (), "run `bringup devices`")
    if host:
        return Omitted("env", LLAMA_GRAPHS, "the device is the host: llama.cpp captures graphs only on a GPU",
                       (f"device.backend: {x.profile.device.backend}",))
    found = verdict(x)
    if found.passed and found.whole_step:
        return Omitted("env", LLAMA_GRAPHS, f"not needed: llama.cpp captures its decode graph, and {found.evidence}",
                       found.lines)
    why = found.evidence if not found.passed else f"{found.evidence}, but the whole decode step's replay is not"
    return Setting("env", LLAMA_GRAPHS, "1", f"decode without CUDA graphs: {why}", found.lines,)


def _mode(mode: str) -> str:
    return json.dumps({"cudagraph_mode": mode}, separators=(",", ":"))
