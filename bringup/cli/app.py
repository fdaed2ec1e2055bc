"""The `bringup` command: one sub-command per stage. User errors end in one line and exit code 2.

Sub-command modules are imported only when that sub-command runs (see lazy_group), so `--help` is quick.
"""

import sys
from typing import Annotated

import typer

from bringup import __version__
from bringup.cli.lazy_group import MARKUP_MODE, LazyCommand, LazyGroup
from bringup.errors import BringupError

COMMANDS = (
    LazyCommand("devices", "bringup.cli.commands.stages.devices", "command",
                "Which devices torch can use and the OS has, and which one is chosen and why."),
    LazyCommand("probe", "bringup.cli.commands.stages.probe", "command",
                "What the device can really do: executed capability checks with evidence."),
    LazyCommand("verify-ops", "bringup.cli.commands.stages.verify_ops", "command",
                "Every op, dtype by dtype, against float64 on the CPU; --compiled adds torch.compile."),
    LazyCommand("bench", "bringup.cli.commands.stages.bench", "command",
                "Baseline microbenchmarks: matmul, bandwidth, transfers, latency, attention, ops, e2e."),
    LazyCommand("selftest", "bringup.cli.commands.selftest", "command",
                "The runner end to end on the device against float64 on the CPU."),
    LazyCommand("eval", "bringup.cli.commands.eval_cmd", "command",
                "A real model's perplexity, KL divergence and top-1 agreement against a reference run."),
    LazyCommand("tune", "bringup.cli.commands.tune", "command",
                "Measure the served model's plan with care and record it, so later starts reuse it."),
    LazyCommand("soak", "bringup.cli.commands.soak", "command",
                "Repeat checked work for minutes: rate drift (throttling) and intermittent wrong results."),
    LazyCommand("generate", "bringup.cli.commands.generate", "command",
                "Generate text for a prompt with the runner, planned from the profile."),
    LazyCommand("serve", "bringup.cli.commands.serve", "command",
                "Serve a model over an OpenAI-compatible HTTP API, planned from the profile."),
    LazyCommand("verify-collectives", "bringup.cli.commands.stages.verify_collectives", "command",
                "torch.distributed collectives: exact results, bandwidth, faults named."),
    LazyCommand("fleet", "bringup.cli.commands.fleet", "command",
                "The stages on every rank's device through torch.distributed; the ranks unlike the others named."),
    LazyCommand("all", "bringup.cli.commands.all_cmd", "command",
                "Run the stages in order into one profile, then one screen of summary."),
    LazyCommand("env", "bringup.cli.commands.env_cmd", "command",
                "A pasteable environment report: torch build, accelerator runtimes, drivers, compilers, "
                "packages, visibility variables, CPU flags, OS."),
    LazyCommand("report", "bringup.cli.commands.report_cmd", "command",
                "One self-contained HTML page (or Markdown) from a profile, optionally against a baseline."),
    LazyCommand("export", "bringup.cli.commands.export_cmd", "command",
                "The vLLM or llama-server command line the profile's evidence supports, each flag with its reason."),
    LazyCommand("profile", "bringup.cli.commands.profile_cmd", "app",
                "Read, check and compare capability profiles (show, validate, diff)."),
)


class BringupGroup(LazyGroup):
    lazy_commands = COMMANDS


app = typer.Typer(
    name="bringup",
    cls=BringupGroup,
    help="Bring LLM inference up on a new or unfamiliar accelerator: which device am I on, what can it do, "
    "are its numbers right, how fast is it — recorded in one YAML capability profile that the bundled "
    "runner plans from.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,  # --install-completion / --show-completion; sub-commands complete through the lazy group
    rich_markup_mode=MARKUP_MODE,
    context_settings={"help_option_names": ["-h", "--help"]},  # every sub-command's context inherits them
)


def show_version(value: bool) -> None:
    if value:
        print(f"bringup {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=show_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Errors only: no logs, warnings, progress bars or tables on the "
                           "terminal (--json documents still print; the exit code tells the outcome).")
    ] = False,
) -> None:
    """Stages: devices → probe → verify-ops → bench → selftest (or `all`); then generate / serve from the profile."""
    if quiet:  # not unset here: `bringup all` runs its stages through this group, each without -q
        from bringup.cli.output import set_quiet

        set_quiet(True)


def print_error(message: str) -> None:
    from rich.text import Text

    from bringup.cli.output import err_console
    from bringup.terminal_text import shown

    err_console.print(Text.assemble(("error: ", "bold red"), shown(message)), soft_wrap=True)


def command_named(args: list[str]) -> str | None:
    """The sub-command a command line runs (the first argument that names one)."""
    names = {c.name for c in COMMANDS}
    return next((arg for arg in args if arg in names), None)


def main() -> None:
    from bringup.cli.output import set_quiet

    set_quiet(False)  # each run starts loud (tests run many in one process); `--quiet` sets it for this one
    try:
        app()
    except BringupError as exc:
        print_error(str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print_error("interrupted; the profile on disk is the last complete write")
        sys.exit(130)
    except ModuleNotFoundError as exc:
        from bringup.cli.extras import missing_extra_message

        message = missing_extra_message(exc.name, command_named(sys.argv[1:]))
        if message is not None:
            print_error(message)
            sys.exit(2)
        if exc.name != "torch":
            raise
        print_error("this command needs PyTorch, which is not installed in this environment; install your "
                    "vendor's torch (see docs/install.md) — `report` and `profile` work without it")
        sys.exit(2)
