"""A model split by layers across devices (the placement's layer split): the embeddings and the first run of layers
on the first member, each further run on its member, the final norm and the head on the last. Each layer brings
the step's activations, rotary rows and attention metadata to its device before it runs (a forward pre-hook: the
decoder's own forward is unchanged); a copy between two devices goes through the host where the devices have no
peer access, as torch does. Each layer's KV cache is allocated on its layer's device."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import torch
from torch import nn

from bringup.runner.model.attention_layer import AttentionMetadata
from bringup.runner.model.decoder import DecoderModel

PLACED_ON = "placed_on"  # the attribute a split layer carries: its device (decoder.allocate_kv_cache reads it)


class _StepCopies:
    """What one step moved to each device, so the layers of one member share one copy of the metadata and the
    rotary rows (the source objects are kept and compared by identity: a new step brings new ones)."""

    def __init__(self) -> None:
        self._by_device: dict[torch.device, tuple[tuple[Any, ...], tuple[Any, ...]]] = {}

    def on(self, device: torch.device, cos: torch.Tensor, sin: torch.Tensor,
           meta: AttentionMetadata) -> tuple[torch.Tensor, torch.Tensor, AttentionMetadata]:
        sources = (cos, sin, meta)
        found = self._by_device.get(device)
        if found is not None and all(a is b for a, b in zip(found[0], sources)):
            return found[1]  # type: ignore[return-value]
        moved = (cos.to(device), sin.to(device), _meta_on(meta, device))
        self._by_device[device] = (sources, moved)
        return moved


def _meta_on(meta: AttentionMetadata, device: torch.device) -> AttentionMetadata:
    tensors = {f.name: getattr(meta, f.name) for f in fields(meta) if isinstance(getattr(meta, f.name), torch.Tensor)}
    moved: dict[str, Any] = {name: t.to(device) for name, t in tensors.items() if t.device != device}
    if meta.parts is not None:  # a mixed step: each part's metadata too
        moved["parts"] = [replace(part, meta=_meta_on(part.meta, device)) for part in meta.parts]
    return replace(meta, **moved) if moved else meta


def _hook(device: torch.device, copies: _StepCopies):  # type: ignore[no-untyped-def]
    def bring(_module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        x, kind, cos, sin, meta = args
        if x.device == device and cos.device == device:
            return args
        return (x.to(device), kind, *copies.on(device, cos, sin, meta))
    return bring


def split_across(model: DecoderModel, runs: list[tuple[torch.device, int, int]]) -> DecoderModel:
    """`model` (loaded anywhere, e.g. on the host) moved so that each (device, first, last) run of layers sits on
    its device; the model's own device becomes the first member's (where the executor builds a step's inputs)."""
    first_device, last_device = runs[0][0], runs[-1][0]
    copies = _StepCopies()
    for device, first, last in runs:
        for layer in model.layers[first:last + 1]:
            layer.to(device)
            setattr(layer, PLACED_ON, device)
            layer.register_forward_pre_hook(_hook(device, copies))
    model.norm.to(last_device)
    model.lm_head.to(last_device)
    # the hidden states come back to the first member (the executor indexes them with the step's inputs there), and
    # go to the last one again for the head
    model.register_forward_hook(lambda _m, _args, hidden: hidden.to(first_device))
    model.lm_head.register_forward_pre_hook(lambda _m, args: (args[0].to(last_device), *args[1:]))
    model.embed = nn.Parameter(model.embed.data.to(first_device), requires_grad=False)
    for name, buffer in list(model.named_buffers(recurse=False)):
        setattr(model, name, buffer.to(first_device))
    model.device = first_device
    return model
