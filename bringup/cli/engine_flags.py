"""Engine options on the command line, generated from their one definition (runner/engine/options.py).

A command takes the option groups it needs:

    @takes_engine_options(TARGET, MODEL)
    def command(..., options: EngineOptions = ENGINE_OPTIONS, json: JsonOption = False) -> None:

The `options` parameter is replaced, where it stands, by one typer option per field of those groups (flag,
help, default and limits from the field), and the command is called with the `EngineOptions` they fill.
Importing this module stays light (no torch): every command's `--help` reads it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import Field, fields
from typing import Annotated, Any

import typer

from bringup.cli.checks import device_name
from bringup.runner.engine import options as definition
from bringup.runner.engine.options import EngineOptions

PARAMETER = "options"
ENGINE_OPTIONS: Any = None  # the placeholder default of a command's `options` parameter
CALLBACKS: dict[str, Callable[..., Any]] = {"device": device_name}  # parsing checks of the command line


def flagged_fields() -> dict[str, Field]:
    return {f.name: f for f in fields(EngineOptions) if "flag" in f.metadata}


def option_type(name: str, more_help: str = "") -> Any:
    """`Annotated[type, typer.Option(...)]` for the field `name`; `more_help` ends its help (what else the
    flag does in this command)."""
    found = flagged_fields()[name]
    flag: definition.Flag = found.metadata["flag"]
    python_type = eval(found.type, vars(definition))  # the field's annotation, a string under postponed evaluation
    help_text = f"{flag.help} {more_help}".strip()
    option = typer.Option(*flag.names, help=help_text, min=flag.min, metavar=flag.metavar,
                          callback=CALLBACKS.get(name))
    return Annotated[python_type, option]


def engine_options(values: Mapping[str, Any]) -> EngineOptions:
    """The engine options a command line gives (the fields it names; the others keep their defaults)."""
    return EngineOptions(**values)


def takes_engine_options(*groups: str, more_help: Mapping[str, str] | None = None) -> Callable:
    """Replace the command's `options` parameter by the flags of `groups` (in that order), and call it with the
    EngineOptions they fill. `more_help` adds to a flag's help what else it does in this command."""
    names = [name for group in groups for name, f in flagged_fields().items() if f.metadata["flag"].group == group]

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command, eval_str=True)
        params = list(signature.parameters.values())
        at = [p.name for p in params].index(PARAMETER)
        generated = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                       annotation=option_type(name, (more_help or {}).get(name, "")),
                                       default=flagged_fields()[name].default) for name in names]

        @functools.wraps(command)
        def run(**given: Any) -> Any:
            values = {name: given.pop(name) for name in names}
            return command(**given, options=engine_options(values))

        params[at:at + 1] = generated
        run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params} | {"return": signature.return_annotation}
        return run

    return decorate
