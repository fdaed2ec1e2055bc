"""The `bringup` command: one sub-command per stage. User errors end in one line and exit code 2."""

import sys
from typing import Annotated

import typer
from rich.text import Text

from bringup import __version__
from bringup.cli import (
    all_cmd,
    bench,
    devices,
    generate,
    probe,
    profile_cmd,
    selftest,
    serve,
    verify_collectives,
    verify_ops,
)
from bringup.cli.output import err_console
from bringup.errors import BringupError

app = typer.Typer(
    name="bringup",
    help="Bring LLM inference up on a new or unfamiliar accelerator: which device am I on, what can it do, "
    "are its numbers right, how fast is it — recorded in one YAML capability profile that the bundled "
    "runner plans from.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
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
) -> None:
    """Stages: devices → probe → verify-ops → bench → selftest (or `all`); then generate / serve from the profile."""


app.command("devices")(devices.command)
app.command("probe")(probe.command)
app.command("verify-ops")(verify_ops.command)
app.command("bench")(bench.command)
app.command("selftest")(selftest.command)
app.command("generate")(generate.command)
app.command("serve")(serve.command)
app.command("verify-collectives")(verify_collectives.command)
app.command("all")(all_cmd.command)
app.add_typer(profile_cmd.app, name="profile")


def main() -> None:
    try:
        app()
    except BringupError as exc:
        err_console.print(Text.assemble(("error: ", "bold red"), str(exc)), soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted; the profile on disk is the last complete write")
        sys.exit(130)
