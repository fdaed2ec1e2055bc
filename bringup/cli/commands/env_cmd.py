"""`bringup env`: a pasteable environment report for bug reports; `--profile` records it in the profile too."""

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from bringup.cli.common import DeviceOption, ForceOption, JsonOption, VerboseOption
from bringup.terminal_text import shown

EnvProfileOption = Annotated[
    Optional[Path],
    typer.Option("--profile", "-p", help="Also record these facts in this profile's environment section "
                 "(without it nothing is written)."),
]
TimeoutOption = Annotated[
    float, typer.Option("--tool-timeout", min=0.1, max=60.0, help="Seconds each external tool (nvidia-smi, gcc, "
                        "...) may take before it is cut off and reported as timed out.")
]


def render_text(sections: dict[str, dict[str, str]]) -> str:
    """`[section]` headers and one `key: value` line per fact: plain text that pastes into an issue."""
    blocks = []
    for name, facts in sections.items():
        lines = [f"[{name}]", *(shown(f"{key}: {value}").replace("\n", "\\n") for key, value in facts.items())]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def command(
    profile: EnvProfileOption = None,
    json_out: JsonOption = False,
    device: DeviceOption = None,
    force: ForceOption = False,
    verbose: VerboseOption = False,
    tool_timeout: TimeoutOption = 4.0,
) -> None:
    """Print the environment a bug report needs: torch build and runtimes, drivers, compilers, packages,
    variables, CPU features and OS.

    Example: `bringup env > env.txt`, `bringup env --json`, `bringup env --profile profiles/cpu.yaml`.
    """
    from bringup.cli.common import stage_context
    from bringup.cli.output import print_json
    from bringup.cli.render.env_json import typed_sections
    from bringup.cli.torch_floor import warn_if_untested_torch
    from bringup.log import configure_logging
    from bringup.probes.env_facts.report import report_sections
    from bringup.probes.environment import KEY_VARIABLES, collect_environment
    from bringup.profiles.schema import Profile
    from bringup.profiles.store import update_profile

    configure_logging(verbose)
    context = stage_context(device, profile, json_out, verbose, force=force) if profile is not None else None
    environment = collect_environment(timeout=tool_timeout)
    warn_if_untested_torch(environment.torch)
    if context is not None:

        def record(p: Profile) -> None:
            p.environment = environment

        update_profile(context.profile_path, context.info, record, stage="env", status="complete", force=force)
    sections = report_sections(environment, KEY_VARIABLES)
    if json_out:
        print_json("env", typed_sections(sections))
    else:
        print(render_text(sections))
    if context is not None and not json_out:
        print(shown(f"recorded in {context.profile_path}"), file=sys.stderr)
