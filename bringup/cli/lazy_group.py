"""A command group that imports a sub-command's module only when that sub-command runs.

`bringup --help` lists every command from the short help registered here, without importing any of them
(their modules pull in torch, the runner, the server...). `bringup NAME ...` imports NAME's module alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any

import typer
import typer.main
from typer.core import TyperGroup

from bringup.errors import BringupError

# Typer's rich help formatter (typer 0.29) prints a type such as `<bool>` after every option, flags included,
# and in its default "rich" markup mode keeps a docstring's single line breaks, so wrapped docstrings break
# mid-sentence. The plain formatter omits types for flags and re-wraps paragraphs to the terminal width.
MARKUP_MODE = None


@dataclass(frozen=True)
class LazyCommand:
    """`bringup NAME`: `attr` of `module` (a typer-annotated function, or a typer.Typer for a sub-group)."""

    name: str
    module: str
    attr: str
    short_help: str


def load_command(spec: LazyCommand) -> Any:
    """The click command for `spec`; BringupError (one line, exit 2) when its module is not installed."""
    try:
        module = import_module(spec.module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (spec.module == exc.name or spec.module.startswith(exc.name + ".")):
            raise
        raise BringupError(f"`bringup {spec.name}` is not available in this installation: module {spec.module} "
                           "is missing; reinstall bringup or update your checkout") from None
    target = getattr(module, spec.attr)
    if isinstance(target, typer.Typer):
        command = typer.main.get_group(target)
    else:
        holder = typer.Typer(rich_markup_mode=MARKUP_MODE, add_completion=False)
        holder.command(spec.name)(target)
        command = typer.main.get_command(holder)
    command.name = spec.name
    command.short_help = spec.short_help
    return command


class LazyGroup(TyperGroup):
    """A TyperGroup whose sub-commands are `lazy_commands`, imported on first use."""

    lazy_commands: tuple[LazyCommand, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: dict[str, Any] = {}

    def _spec(self, name: str) -> LazyCommand | None:
        return next((c for c in self.lazy_commands if c.name == name), None)

    def list_commands(self, ctx: Any) -> list[str]:
        return [c.name for c in self.lazy_commands] + [n for n in super().list_commands(ctx) if not self._spec(n)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        spec = self._spec(cmd_name)
        if spec is None:
            return super().get_command(ctx, cmd_name)
        if cmd_name not in self._loaded:
            self._loaded[cmd_name] = load_command(spec)
        return self._loaded[cmd_name]

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The command list from the registered short help, so listing imports nothing."""
        rows = [(c.name, c.short_help) for c in self.lazy_commands]
        rows += [(n, super().get_command(ctx, n).get_short_help_str(formatter.width))
                 for n in super().list_commands(ctx) if not self._spec(n)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
