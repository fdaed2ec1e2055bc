"""Limits on what rendering a chat template may cost: time, output, and the size of every value it makes.

A template is code from the model directory. The sandbox keeps it from reaching anything; these limits keep it
from spending without end. A render is given a RenderBudget (a deadline, an output cap, a cap on the characters
of all the values it creates); the template environment checks every step that can grow a value *before* the
value is made, and counts the rest:

- `**` and `*` on integers: refused when the result would pass MAX_INT_BITS (10**(10**7) is never computed);
- `*` and `+` on strings and lists, `~`, `%`-formatting, str.format, the string methods and filters that pad or
  replace (center, ljust, rjust, zfill, expandtabs, replace, indent, join, batch's fill, tojson's indent): the
  size of the result is worked out from the inputs first and refused past the value cap;
- every value made, and every `{{ }}` output, counts toward the render's totals;
- every loop step and every call checks the deadline, so a template that loops without end stops itself
  (a thread cannot be killed: the work has to end on its own).

Python's str() of a list repeats a shared element as often as it is referenced, so sizes are "weights": the
characters a value turns into when printed, counted through containers.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

MAX_INT_BITS = 100_000  # about 30,000 decimal digits
MAX_WEIGHT_DEPTH = 100
MAX_JSON_INDENT = 64
# A render holds the GIL: every YIELD_EVERY_S of rendering it sleeps YIELD_FOR_S, so the threads that answer
# other requests (the server's event loop) get the interpreter promptly even while several renders run.
YIELD_EVERY_S = 0.004
YIELD_FOR_S = 0.001
_FORMAT_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class TemplateLimits:
    time_s: float = 10.0  # one render's wall-clock budget
    max_output_chars: int = 4 * 1024 * 1024  # the rendered text
    max_value_chars: int = 4 * 1024 * 1024  # any one value the template makes (string, list, ...)
    max_created_chars: int = 32 * 1024 * 1024  # all the values one render makes, together


class TemplateLimitExceeded(jinja2.exceptions.SecurityError):
    """A render went over one of its limits (one line, naming the limit)."""


class RenderBudget:
    def __init__(self, limits: TemplateLimits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.time_s
        self.next_yield = time.monotonic() + YIELD_EVERY_S
        self.created = 0
        self.output = 0

    def tick(self) -> None:
        now = time.monotonic()
        if now > self.deadline:
            raise TemplateLimitExceeded(f"rendering took longer than its time budget of {self.limits.time_s:g} s")
        if now > self.next_yield:
            time.sleep(YIELD_FOR_S)
            self.next_yield = time.monotonic() + YIELD_EVERY_S

    def allow(self, size: int, what: str) -> None:
        """Refuse making a value of `size` characters, or count it."""
        self.tick()
        if size > self.limits.max_value_chars:
            raise TemplateLimitExceeded(f"{what} would make a value of {size} characters, over the limit of "
                                        f"{self.limits.max_value_chars}")
        self.created += size
        if self.created > self.limits.max_created_chars:
            raise TemplateLimitExceeded(f"the values made in one rendering passed {self.limits.max_created_chars} "
                                        "characters together")

    def emit(self, size: int) -> None:
        self.tick()
        self.output += size
        if self.output > self.limits.max_output_chars:
            raise TemplateLimitExceeded(f"the rendered text passed {self.limits.max_output_chars} characters")


DEFAULT_LIMITS = TemplateLimits()
_LIMITS: ContextVar[TemplateLimits | None] = ContextVar("template_limits", default=None)
_BUDGET: ContextVar[RenderBudget | None] = ContextVar("render_budget", default=None)


def run_with_limits(limits: TemplateLimits, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """function(*args, **kwargs), with every template it renders held to `limits` (for a worker thread)."""
    token = _LIMITS.set(limits)
    try:
        return function(*args, **kwargs)
    finally:
        _LIMITS.reset(token)


@contextmanager
def render_budget() -> Iterator[RenderBudget]:
    budget = RenderBudget(_LIMITS.get() or DEFAULT_LIMITS)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def render_bounded(template: jinja2.Template, context: Mapping[str, Any]) -> str:
    """The template rendered under a fresh budget (TemplateLimitExceeded past any limit)."""
    with render_budget() as budget:
        pieces = []
        for piece in template.generate(**context):
            budget.emit(len(piece))
            pieces.append(piece)
        return "".join(pieces)


def _budget() -> RenderBudget:
    budget = _BUDGET.get()
    if budget is None:  # a template used outside render_bounded still gets limits
        budget = RenderBudget(_LIMITS.get() or DEFAULT_LIMITS)
        _BUDGET.set(budget)
    return budget


def weight(value: Any, depth: int = 0) -> int:
    """The characters `value` turns into when printed, through containers (shared elements counted each time)."""
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, bool) or value is None:
        return 5
    if isinstance(value, int):
        return value.bit_length() // 3 + 1
    if depth > MAX_WEIGHT_DEPTH:
        raise TemplateLimitExceeded(f"a value nested deeper than {MAX_WEIGHT_DEPTH} levels")
    if isinstance(value, Mapping):
        return 2 + sum(weight(k, depth + 1) + weight(v, depth + 1) + 4 for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return 2 + sum(weight(item, depth + 1) + 2 for item in value)
    if isinstance(value, jinja2.utils.Namespace):
        return weight(value._Namespace__attrs, depth + 1)  # type: ignore[attr-defined]
    return 32


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (str, list, tuple))


def _check_int_power(base: int, exponent: int) -> None:
    if exponent > 0 and abs(base) > 1 and abs(base).bit_length() * exponent > MAX_INT_BITS:
        raise TemplateLimitExceeded(f"{base} ** {exponent} has more than {MAX_INT_BITS} bits")


def _check_format_string(text: str, what: str, budget: RenderBudget) -> None:
    """A width or precision in a format string pads the result: none may pass the value cap."""
    if "*" in text and what == "%-formatting":
        raise TemplateLimitExceeded("%-formatting with a '*' width is not allowed in a chat template")
    for number in _FORMAT_NUMBER.findall(text):
        if len(number) > 9 or int(number) > budget.limits.max_value_chars:
            raise TemplateLimitExceeded(f"{what} pads to {number} characters, over the limit of "
                                        f"{budget.limits.max_value_chars}")


def _format_args_weight(args: Any) -> int:
    return weight(args) if isinstance(args, (tuple, Mapping)) else weight((args,))


def check_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse an operation whose result would be over a limit, before it is computed."""
    budget = _budget()
    budget.tick()
    ints = isinstance(left, int) and isinstance(right, int)
    if operator == "**" and ints:
        _check_int_power(left, right)
    elif operator == "*" and ints:
        if left.bit_length() + right.bit_length() > MAX_INT_BITS:
            raise TemplateLimitExceeded(f"a product of more than {MAX_INT_BITS} bits")
    elif operator == "*" and ((_is_sequence(left) and isinstance(right, int)) or
                              (_is_sequence(right) and isinstance(left, int))):
        sequence, times = (left, right) if _is_sequence(left) else (right, left)
        budget.allow(weight(sequence) * max(times, 0), f"repeating a {type(sequence).__name__} {times} times")
    elif operator == "+" and _is_sequence(left) and type(left) is type(right):
        budget.allow(weight(left) + weight(right), f"joining two {type(left).__name__}s")
    elif operator == "%" and isinstance(left, str):
        _check_format_string(left, "%-formatting", budget)
        budget.allow(len(left) + _format_args_weight(right), "%-formatting")


_GROWING_METHODS: dict[str, Callable[[str, tuple, dict], int]] = {
    "replace": lambda s, a, k: len(s) + (s.count(a[0]) if a[0] else len(s) + 1) * max(len(a[1]) - len(a[0]), 0)
    if len(a) >= 2 and isinstance(a[0], str) and isinstance(a[1], str) else len(s),
    "center": lambda s, a, k: max(len(s), int(a[0]) if a and isinstance(a[0], int) else 0),
    "ljust": lambda s, a, k: max(len(s), int(a[0]) if a and isinstance(a[0], int) else 0),
    "rjust": lambda s, a, k: max(len(s), int(a[0]) if a and isinstance(a[0], int) else 0),
    "zfill": lambda s, a, k: max(len(s), int(a[0]) if a and isinstance(a[0], int) else 0),
    "expandtabs": lambda s, a, k: len(s) + s.count("\t") * max(int(a[0]) if a and isinstance(a[0], int) else
                                                               int(k.get("tabsize", 8)), 0),
    "join": lambda s, a, k: len(s) * max(len(a[0]) - 1, 0) + weight(a[0]) if a and isinstance(a[0], (list, tuple))
    else len(s),
}


def check_call(function: Any, args: tuple, kwargs: dict) -> None:
    """Refuse a string method call whose result would be over a limit, before it runs."""
    budget = _budget()
    budget.tick()
    function = getattr(function, "__wrapped__", function)  # the sandbox wraps str.format
    owner = getattr(function, "__self__", None)
    if not isinstance(owner, str):
        return
    name = getattr(function, "__name__", "")
    if name in _GROWING_METHODS:
        budget.allow(_GROWING_METHODS[name](owner, args, kwargs), f"str.{name}")
    elif name in ("format", "format_map"):
        _check_format_string(owner, f"str.{name}", budget)
        budget.allow(len(owner) + weight(args) + weight(kwargs), f"str.{name}")


def budgeted_iteration(iterable: Iterable) -> Iterator:
    """A loop's items, checking the deadline at each step."""
    budget = _budget()
    for item in iterable:
        budget.tick()
        yield item


def bounded_concat(*values: Any) -> str:
    """`a ~ b ~ ...`, refused before joining when the result would be over a limit."""
    _budget().allow(sum(weight(v) for v in values), "joining with ~")
    return "".join(str(v) for v in values)


def bounded_output(value: Any) -> Any:
    """Every `{{ }}` value (the environment's finalize): refused before printing when over a limit."""
    if not isinstance(value, str):
        _budget().allow(weight(value), "printing a value")
    return value


def bounded_tojson(value: Any, ensure_ascii: bool = False, indent: int | str | None = None,
                   separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """json.dumps as transformers' `tojson` has it, encoded piece by piece and stopped past the value cap."""
    budget = _budget()
    if (isinstance(indent, int) and indent > MAX_JSON_INDENT) or (isinstance(indent, str) and len(indent) > \
            MAX_JSON_INDENT):
        raise TemplateLimitExceeded(f"tojson indent of {indent if isinstance(indent, int) else len(indent)} is "
                                    f"over the limit of {MAX_JSON_INDENT}")
    encoder = json.JSONEncoder(ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    pieces, size = [], 0
    for piece in encoder.iterencode(value):
        size += len(piece)
        if size > budget.limits.max_value_chars:
            budget.allow(size, "tojson")
        pieces.append(piece)
    budget.allow(size, "tojson")
    return "".join(pieces)


def _text_size(value: Any) -> int:
    return len(value) if isinstance(value, str) else weight(value)


def _replaced_size(text: str, old: Any, new: Any) -> int:
    if not (isinstance(text, str) and isinstance(old, str) and isinstance(new, str)):
        return _text_size(text)
    matches = text.count(old) if old else len(text) + 1
    return len(text) + matches * max(len(new) - len(old), 0)


def _indented_size(a: dict) -> int:
    width = a["width"]
    pad = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    return _text_size(a["s"]) + max(pad, 0) * (str(a["s"]).count("\n") + 1)


def _formatted_size(a: dict) -> int:
    if isinstance(a["value"], str):
        _check_format_string(a["value"], "the format filter", _budget())
    return _text_size(a["value"]) + weight(a["args"]) + weight(a["kwargs"])


def _wrapped_size(a: dict) -> int:
    width = a["width"] if isinstance(a["width"], int) and a["width"] > 0 else 1
    wrap = a["wrapstring"] if isinstance(a["wrapstring"], str) else "\n"
    return _text_size(a["s"]) * (1 + len(wrap) // width + 1)


# each filter that can make a value bigger than its input, with the size of its result from its arguments
_FILTER_SIZES: dict[str, Callable[[dict], int]] = {
    "indent": _indented_size,
    "center": lambda a: max(_text_size(a["value"]), a["width"] if isinstance(a["width"], int) else 0),
    "join": lambda a: weight(a["value"]) + len(str(a["d"])) * len(a["value"]),
    "replace": lambda a: _replaced_size(a["s"], a["old"], a["new"]),
    "format": _formatted_size,
    "wordwrap": _wrapped_size,
    "truncate": lambda a: _text_size(a["s"]) + len(str(a["end"])),
    "string": lambda a: weight(a["s"]),
    "list": lambda a: weight(a["value"]),
}


_PASSED_NAMES = ("eval_ctx", "environment", "env", "context", "ctx")


def _checked_filter(original: Callable, name: str) -> Callable:
    """The filter, refused before it runs when its result would be over a limit (sized by _FILTER_SIZES)."""
    passes_first = getattr(original, "jinja_pass_arg", None) is not None
    signature = inspect.signature(original)
    parameters = list(signature.parameters.values())
    if parameters and parameters[0].name in _PASSED_NAMES:  # (an async variant's wrapped function has none)
        signature = signature.replace(parameters=parameters[1:])

    @functools.wraps(original)
    def checked(*args: Any, **kwargs: Any) -> Any:
        head, given = (args[:1], list(args[1:])) if passes_first else ((), list(args))
        if given and isinstance(given[0], Iterator):
            given[0] = list(given[0])  # a generator (select, map): sized once, then handed on
        bound = signature.bind(*given, **kwargs)
        bound.apply_defaults()
        _budget().allow(_FILTER_SIZES[name](bound.arguments), f"the {name} filter")
        return original(*head, *given, **kwargs)

    return checked


def _batch(value: Iterable, linecount: int, fill_with: Any = None) -> Any:
    if not isinstance(linecount, int) or linecount > _budget().limits.max_value_chars:
        raise TemplateLimitExceeded(f"batch of {linecount} items is over the limit")
    return jinja2.filters.do_batch(value, linecount, fill_with)


@jinja2.pass_environment
def _sum(environment: jinja2.Environment, iterable: Iterable, attribute: Any = None, start: Any = 0) -> Any:
    """The sum filter on numbers only (a sum of lists or strings grows quadratically, in one C call)."""
    items = list(iterable)
    if not isinstance(start, (int, float)) or (attribute is None and \
            not all(isinstance(i, (int, float)) for i in items)):
        raise TemplateLimitExceeded("the sum filter adds numbers only in a chat template")
    total = jinja2.filters.sync_do_sum(environment, items, attribute, start)
    if isinstance(total, int):
        _check_int_power(total, 1)
    return total


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with every growing operation checked against the render's budget."""

    intercepted_binops = frozenset({"**", "*", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(finalize=bounded_output, **options)
        self.budgeted_iteration = budgeted_iteration
        self.bounded_concat = bounded_concat
        self.filters["tojson"] = bounded_tojson
        for name in _FILTER_SIZES:
            self.filters[name] = _checked_filter(self.filters[name], name)
        self.filters["batch"] = _batch
        self.filters["sum"] = _sum
        self.filters.pop("pprint", None)  # pformat of shared references has no cheap size bound
        self.globals.pop("lipsum", None)  # makes any amount of text on request

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        check_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        check_call(__obj, args, kwargs)
        return ImmutableSandboxedEnvironment.call(__self, __context, __obj, *args, **kwargs)

    def from_bounded_source(self, source: str) -> jinja2.Template:
        """Compile with every loop and `~` routed through the budget."""
        tree = self.parse(source)
        for loop in tree.find_all(nodes.For):
            loop.iter = nodes.Call(nodes.EnvironmentAttribute("budgeted_iteration"), [loop.iter], [], None, None)
        for parent in tree.find_all(nodes.Node):
            for name, child in parent.iter_fields():
                if isinstance(child, nodes.Concat):
                    setattr(parent, name, _concat_call(child))
                elif isinstance(child, list):
                    setattr(parent, name, [_concat_call(c) if isinstance(c, nodes.Concat) else c for c in child])
        return self.from_string(tree)


def _concat_call(node: nodes.Concat) -> nodes.Call:
    return nodes.Call(nodes.EnvironmentAttribute("bounded_concat"), list(node.nodes), [], None, None,
                      lineno=node.lineno)
