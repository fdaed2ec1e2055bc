"""A placement (the plan's `placement` row, as `generate --json` and `/v1/plan` give it) as another engine's
settings: llama.cpp's `-dev`, `-sm`, `-ts`, `-mg` and `-ngl`; vLLM's pipeline-parallel size, layer partition and
visible devices where vLLM runs the pair, otherwise why not. Torch-free; reads the row's data, never its display
form. A member is named by its torch device (`cuda:1`, `cpu`): its type is the backend, its index the device's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bringup.backends.host import HOST_DEVICE_TYPE
from bringup.backends.peer_names import PEER_GPU_FAMILY, llama_cpp_device
from bringup.bounded_file import FileRefused, read_bounded
from bringup.errors import BringupError
from bringup.export.config import Omitted, Setting

Item = Setting | Omitted
MAX_PLAN_BYTES = 4 << 20
HOST, GPU = HOST_DEVICE_TYPE, PEER_GPU_FAMILY  # the families these mappings cover: the host, and the peers' GPUs
ORDER = ("CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER as torch saw them (llama.cpp's CUDA{N} and torch's cuda:N "
         "then name the same card)")


def read_placement(path: Path) -> dict[str, Any]:
    """The placement row's value from a `generate --json` or `/v1/plan` document; BringupError in one line."""
    what = f"--placement {path}"
    try:
        document = json.loads(read_bounded(path, MAX_PLAN_BYTES))
    except (FileRefused, OSError) as exc:
        raise BringupError(f"{what}: cannot be read ({exc}); give the JSON that `bringup generate --json` prints "
                           "or that GET /v1/plan returns") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BringupError(f"{what}: is not JSON ({exc}); give the JSON that `bringup generate --json` prints or "
                           "that GET /v1/plan returns") from None
    plan = document.get("plan", document) if isinstance(document, dict) else None
    row = plan.get("placement") if isinstance(plan, dict) else None
    value = row.get("value") if isinstance(row, dict) else None
    if not _well_formed(value):
        raise BringupError(f"{what}: holds no placement of several devices (plan.placement.value with its mode and "
                           "devices); run `bringup generate --json` with --device naming several devices")
    return value


def _well_formed(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("devices"), list) or not value["devices"]:
        return False
    return all(isinstance(m, dict) and isinstance(m.get("device"), str) and isinstance(m.get("layers"), list)
               and len(m["layers"]) == 2 and all(isinstance(i, int) for i in m["layers"]) for m in value["devices"])


def _backend(device: str) -> tuple[str, int | None]:
    kind, _, index = device.partition(":")
    return kind, int(index) if index.isdigit() else None


def _counts(value: dict[str, Any]) -> list[tuple[str, int]]:
    """Each member and the layers it holds, in pipeline order."""
    return [(m["device"], m["layers"][1] - m["layers"][0] + 1) for m in value["devices"]]


def _evidence(value: dict[str, Any]) -> tuple[str, ...]:
    return tuple(f"placement: {m['device']} layers [{m['layers'][0]}, {m['layers'][1]}]" for m in value["devices"])


REPLICAS_WHY = ("the placement runs replicas (one engine per device, a router above them): start one {engine} per "
                "device, each given that device alone; a router in front of them is not part of {engine}")


def _unmapped(value: dict[str, Any], engine: str, covered: str) -> str | None:
    """Why `engine` cannot run this placement's devices, or None."""
    if value.get("mode") == "replicas":
        return REPLICAS_WHY.format(engine=engine)
    odd = [d for d, _ in _counts(value) if _backend(d)[0] not in (HOST, GPU) or
           (_backend(d)[0] == GPU and _backend(d)[1] is None)]
    if odd:
        which = "this device" if len(odd) == 1 else "these devices"
        return f"{', '.join(odd)}: {engine} has no backend for {which} ({covered})"
    return None


def llama_cpp_items(value: dict[str, Any]) -> list[Item]:
    """llama-server's placement flags: one GPU alone (-sm none -mg N), or the layers split as planned (-dev in
    pipeline order, -sm layer, -ts each GPU's layers, -ngl the layers off the host). llama.cpp keeps the host's
    layers first and gives the output layer to the last GPU, as the planner orders a pipeline (fastest last)."""
    names = ("-dev", "-sm", "-ts", "-mg", "-ngl")
    why = _unmapped(value, "llama.cpp", "this mapping covers CUDA devices and the host")
    if why is not None:
        return [Omitted("flag", name, f"{why}: the placement cannot be given to llama-server", _evidence(value))
                for name in names]
    counts = _counts(value)
    layers = sum(c for _, c in counts)
    gpus = [(d, c) for d, c in counts if _backend(d)[0] == GPU]
    hosts = [d for d, _ in counts if _backend(d)[0] == HOST]
    if gpus and hosts and counts.index(gpus[0]) < len(hosts):
        return [Omitted("flag", name, "the placement runs host layers after a GPU's; llama.cpp keeps the host's "
                        "layers first", _evidence(value)) for name in names]
    if not gpus:
        return [Setting("flag", "-ngl", "0", "the placement runs every layer on the host", _evidence(value))]
    return _gpu_flags(value, gpus, layers, bool(hosts))


def _gpu_flags(value: dict[str, Any], gpus: list[tuple[str, int]], layers: int, hosts: bool) -> list[Item]:
    said = _evidence(value)
    on_gpus = sum(c for _, c in gpus) + 1  # and the output layer, on the last GPU as on the last member
    ngl = ("all" if not hosts else str(on_gpus),
           f"{'every layer' if not hosts else f'the last {on_gpus - 1} of {layers} layers'} and the output layer "
           "off the host (llama.cpp keeps the input embeddings on the host)")
    if len(gpus) == 1:
        (device, _), index = gpus[0], _backend(gpus[0][0])[1]
        return [Setting("flag", "-sm", "none", f"one GPU ({device}) holds every offloaded layer", said),
                Setting("flag", "-mg", str(index), f"{device}: llama.cpp's {llama_cpp_device(index)}, with {ORDER}",
                        said),
                Setting("flag", "-ngl", *ngl, said)]
    shares = [c + (1 if i == len(gpus) - 1 else 0) for i, (_, c) in enumerate(gpus)]
    return [Setting("flag", "-dev", ",".join(llama_cpp_device(_backend(d)[1]) for d, _ in gpus),
                    f"the GPUs in pipeline order ({', '.join(d for d, _ in gpus)}), with {ORDER}", said),
            Setting("flag", "-sm", "layer", "the placement splits the layers (a pipeline)", said),
            Setting("flag", "-ts", ",".join(map(str, shares)), "each GPU's layers, in -dev's order (the last "
                    "counts the output layer): llama.cpp assigns layers in these proportions, as the plan did", said),
            Omitted("flag", "-mg", "used only with -sm none or row; a layer split needs none", said),
            Setting("flag", "-ngl", *ngl, said)]


def vllm_items(value: dict[str, Any]) -> list[Item]:
    """vLLM's pipeline settings: one platform (CUDA) for every stage, stages in pipeline order."""
    names = (("flag", "--pipeline-parallel-size"), ("env", "VLLM_PP_LAYER_PARTITION"), ("env", "CUDA_VISIBLE_DEVICES"))
    said = _evidence(value)
    why = _unmapped(value, "vLLM", "this mapping covers CUDA devices")
    kinds = {_backend(d)[0] for d, _ in _counts(value)}
    if why is None and kinds == {HOST}:
        why = "the placement runs on the host alone: vLLM's CPU build runs it, with no pipeline"
    elif why is None and HOST in kinds:
        why = ("vLLM runs a model on one platform, and a pipeline of CUDA and host stages is not one: llama.cpp's "
               "partial offload runs this pair")
    if why is not None:
        return [Omitted(kind, name, why, said) for kind, name in names]
    counts = _counts(value)
    visible = ",".join(str(_backend(d)[1]) for d, _ in counts)
    if len(counts) == 1:
        return [Omitted("flag", "--pipeline-parallel-size", "one device runs the model", said),
                Setting("env", "CUDA_VISIBLE_DEVICES", visible, f"{counts[0][0]} alone, with {ORDER}", said)]
    return [Setting("flag", "--pipeline-parallel-size", str(len(counts)), "one pipeline stage per device of the "
                    "layer split", said),
            Setting("env", "VLLM_PP_LAYER_PARTITION", ",".join(str(c) for _, c in counts), "each stage's layers as "
                    "the plan placed them (vLLM's default partition is even)", said),
            Setting("env", "CUDA_VISIBLE_DEVICES", visible, f"the devices in pipeline order, with {ORDER}", said)]
