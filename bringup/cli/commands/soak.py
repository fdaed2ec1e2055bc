"""`bringup soak`: the same work repeated for minutes; drift and intermittent wrong results named."""

from __future__ import annotations

from typing import Annotated

import typer

from bringup.cli.common import DetailsOption, DeviceOption, ForceOption, JsonOption, ProfileOption, VerboseOption
from bringup.cli.output import console, plain, print_json

SOAK_DTYPES = ("float32", "bfloat16", "float16")


def command(
    minutes: Annotated[float, typer.Option(min=0.0, help="How long to repeat the rounds (at least 10 rounds run).")
                       ] = 5.0,
    size: Annotated[int, typer.Option(min=16, max=16384, help="n of the n x n x n matmul each round times.")] = 512,
    device: DeviceOption = None,
    profile: ProfileOption = None,
    force: ForceOption = False,
    json: JsonOption = False,
    verbose: VerboseOption = False,
    details: DetailsOption = False,
) -> None:
    """Repeat a timed matmul and a matmul + softmax checked against float64, for each dtype the probe found
    supported (of float32, bfloat16, float16), for --minutes; report a rate that drifts down over the run
    (throttling, a neighbour) and results wrong in some rounds only.

    Exit 1 when any round computed a wrong result. Example: bringup soak --minutes 30 --device cuda:0
    """
    import torch

    from bringup.cli.common import stage_context
    from bringup.cli.output import progress
    from bringup.log import get_logger
    from bringup.probes.soak import run_soak
    from bringup.profiles.store import load_profile_or_none, update_profile

    ctx = stage_context(device, profile, json, verbose, force=force)
    known = load_profile_or_none(ctx.profile_path)
    dtypes_caps = known.capabilities.dtypes if known and known.capabilities else {}
    names = [n for n in SOAK_DTYPES if n == "float32" or (n in dtypes_caps and dtypes_caps[n].status == "supported")]
    seconds = minutes * 60
    with progress(json) as bar:
        task = bar.add_task(f"soak on {ctx.info.id}", total=max(seconds, 1e-3))
        section = run_soak(ctx.device, [getattr(torch, n) for n in names], seconds, size,
                           on_round=lambda _, elapsed: bar.update(task, completed=min(elapsed, seconds)))

    def mutate(p) -> None:  # type: ignore[no-untyped-def]
        p.soak = section

    update_profile(ctx.profile_path, ctx.info, mutate, stage="soak", status="complete", force=force)
    log = get_logger("soak")
    for finding in section.findings:
        log.warning("soak: %s", finding)
    if json:
        print_json("soak", {"profile": str(ctx.profile_path), **section.model_dump()})
    else:
        for d in section.dtypes:
            wrong = f"{len(d.wrong_rounds)} wrong" if d.wrong_rounds else "all right"
            console.print(f"{d.dtype:9} {d.rounds} rounds · {d.first_tflops:.3g} → {d.last_tflops:.3g} TFLOP/s "
                          f"({d.ratio:.0%}) · {wrong}" + (f" · {d.bitwise_changes} bitwise changes" if details
                                                         else ""), highlight=False)
        console.print(plain(f"soak {section.status} in {section.seconds:.0f} s — written to {ctx.profile_path}"),
                      highlight=False)
    if section.status == "fail":
        raise typer.Exit(1)
