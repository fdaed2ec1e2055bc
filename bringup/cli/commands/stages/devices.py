"""`bringup devices`: which devices torch can use, which the OS has, and which one bringup picks."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bringup.cli.common import (
    DetailsOption,
    DeviceOption,
    ForceOption,
    JsonOption,
    ProfileOption,
    VerboseOption,
    stage_context,
)
from bringup.cli.output import console, format_bytes, plain, print_json
from bringup.cli.render.check_results import print_section_line, result_cell
from bringup.log import get_logger
from bringup.terminal_text import markup_safe

if TYPE_CHECKING:
    from rich.table import Table

    from bringup.backends.selection.reconcile import PhysicalDevice
    from bringup.backends.selection.select import Selection
    from bringup.probes.inventory import Inventory
    from bringup.profiles.verdict import Check

log = get_logger("devices")


def torch_table(inventory: Inventory, selected_id: str) -> Table:
    from rich.table import Table

    table = Table(title="Devices torch can use", title_justify="left")
    for col in ("id", "name", "kind", "vendor", "arch / ISA", "units", "memory (free)", "PCI", ""):
        table.add_column(col)
    for d in inventory.torch_devices:
        isa = d.extra.get("isa_level")
        arch = f"{d.arch} / {isa}" if isa else (d.arch or "?")
        units = d.extra.get("usable_cores") or d.extra.get("multiprocessors") or ""
        mark = "[bold green]selected[/]" if d.id == selected_id else ""
        kind = {True: "integrated", False: "discrete"}.get(d.integrated, "?") if d.is_accelerator else "host"
        memory = f"{format_bytes(d.memory_total_bytes)} ({format_bytes(d.memory_free_bytes)})"
        table.add_row(*(plain(cell) for cell in (d.id, d.name, kind, d.vendor or "?", arch, units, memory,
                                                 d.pci_bus_id or "—")), mark)
    return table


def unusable_families(inventory: Inventory) -> list[str]:
    return [f"  {f.family}: {f.reason}" for f in inventory.families if not f.usable]


def physical_checks(inventory: Inventory) -> list[tuple[PhysicalDevice, Check]]:
    """Each PCI display/accelerator torch cannot use, graded by the verdict (a usable one is a torch device)."""
    from bringup.profiles.verdict.device_checks import unusable_device_check

    return [(p, unusable_device_check(p.pci.address, f"{p.pci.vendor} {p.pci.kind}", p.family, p.reason))
            for p in inventory.physical if not p.usable]


def device_checks(inventory: Inventory) -> list[Check]:
    """`bringup devices` as the verdict grades it: a device torch can use passes; see physical_checks."""
    from bringup.profiles.verdict.device_checks import usable_device_check

    return [*(usable_device_check(d.id, d.name) for d in inventory.torch_devices),
            *(check for _, check in physical_checks(inventory))]


def system_table(inventory: Inventory) -> Table:
    from rich.table import Table

    graded = {id(p): check for p, check in physical_checks(inventory)}
    table = Table(title=plain(f"PCI display / accelerator devices the OS has (root {inventory.system.root})"),
                  title_justify="left")
    for col in ("PCI address", "vendor", "class", "driver", "iGPU", "torch", "result"):
        table.add_column(col)
    for p in inventory.physical:
        integrated = {True: "yes", False: "no", None: "?"}[p.integrated]
        check = graded.get(id(p))
        status = (f"{result_cell('pass')} usable" if check is None
                  else f"{result_cell(check.result)} {markup_safe(check.reason)}")
        table.add_row(*(plain(cell) for cell in (
            p.pci.address, f"{p.pci.vendor} ({p.pci.vendor_id}:{p.pci.device_id})", p.pci.kind,
            p.pci.driver or "none", integrated, p.torch_id or "—")), status)
    if not inventory.physical:
        table.add_row("—", "no PCI display or accelerator device found", "", "", "", "", "")
    return table


def command(
    device: DeviceOption = None,
    profile: ProfileOption = None,
    json_out: JsonOption = False,
    verbose: VerboseOption = False,
    force: ForceOption = False,
    system_root: Annotated[
        Path, typer.Option("--system-root", help="Read PCI devices and /dev nodes below this root (for fixtures).")
    ] = Path("/"),
    write: Annotated[bool, typer.Option("--write/--no-write", help="Record device and environment in the profile.")]
    = True,
    details: DetailsOption = False,
) -> None:
    """List every device torch can use and every PCI display/accelerator the OS has, and explain the choice.

    Each device torch can use is a pass; an accelerator it cannot use is a warn (the one you meant may be among
    them), or a skip when no backend drives its vendor or a visibility variable hides it on purpose. Ends with
    `devices: n pass, n warn, n fail, n skip`.

    Example: `bringup devices`, `bringup devices --json`, `CUDA_VISIBLE_DEVICES=1 bringup devices`.
    """
    import torch

    from bringup.cli.torch_floor import warn_if_untested_torch
    from bringup.probes.environment import collect_environment
    from bringup.probes.inventory import take_inventory
    from bringup.profiles.schema import Profile
    from bringup.profiles.store import update_profile

    ctx = stage_context(device, profile, json_out, verbose, force=force)
    inventory = take_inventory(system_root)
    warn_if_untested_torch(torch.__version__)
    for warning in inventory.warnings:
        log.warning(warning)
    if write:
        environment = collect_environment()

        def record(p: Profile) -> None:
            p.environment = environment

        update_profile(ctx.profile_path, ctx.info, record, stage="devices", status="complete", force=force)
    selection = ctx.selection
    if json_out:
        data = inventory.to_dict()
        data["selected"] = {"id": selection.info.id, "reason": selection.reason, "source": selection.source,
                            "others": selection.others}
        data["profile"] = str(ctx.profile_path) if write else None
        print_json("devices", data)
        return
    if details:
        print_details(inventory, selection)
    else:
        print_summary(inventory)
    if inventory.visibility:
        console.print(plain("visibility: " + ", ".join(f"{k}={v!r}" for k, v in inventory.visibility.items())))
    console.print(f"selected [bold]{markup_safe(selection.info.id)}[/] ({markup_safe(selection.info.name)}): "
                  f"{markup_safe(selection.reason)}")
    if write:
        console.print(plain(f"profile: {ctx.profile_path}"), highlight=False)
    print_section_line("devices", device_checks(inventory))


def print_details(inventory: Inventory, selection: Selection) -> None:
    console.print(torch_table(inventory, selection.info.id))
    console.print("Families torch cannot use here:", highlight=False)
    for line in unusable_families(inventory):
        console.print(plain(line), highlight=False)
    console.print(system_table(inventory))


def print_summary(inventory: Inventory, shown: int = 3) -> None:
    """One line per device torch can use (its kind and memory), then one per OS accelerator torch cannot use (a
    few, then a count)."""
    from bringup.backends.selection.select import kind_of

    console.print("torch can use:" + ("" if inventory.torch_devices else " none"), highlight=False)
    for d in inventory.torch_devices:
        memory = f"{format_bytes(d.memory_total_bytes)} ({format_bytes(d.memory_free_bytes)} free)"
        console.print(plain(f"  {d.id} ({d.name}): {kind_of(d)}, memory {memory}"), highlight=False)
    unusable = physical_checks(inventory)
    for _, check in unusable[:shown]:
        console.print(f"{result_cell(check.result)}: {markup_safe(check.name)}: {markup_safe(check.reason)}",
                      highlight=False)
    if len(unusable) > shown:
        console.print(f"and {len(unusable) - shown} more the OS has but torch cannot use (--details lists them)",
                      highlight=False)
