"""A compressed-tensors `ignore` list read from config.json, every `re:` pattern compiled here with a bound on its
matching time.

A pattern comes from the model directory and is matched against every linear module's name. Where `google-re2` is
installed (`pip install 'bringup[re2]'`) and reads the pattern, it is matched by RE2, in time linear in the name.
Otherwise it is matched by Python's `re`, which backtracks: a match costs up to the number of ways the pattern can
split a name among its choices, counted here on the parse tree Python's own parser makes. A repeat whose count may
vary can take up to NAME_CHARS + 1 lengths of a name (`?` two), an alternation adds its branches' ways, a sequence
multiplies its parts'. Refused for `re`: a pattern with more than MAX_WAYS ways (two unbounded repeats in a row, as
in `.*mlp.*`, are 4,225; three are 274,625), patterns with more than MAX_TOTAL_WAYS together, a repeat of something
that itself repeats or alternates (`(a+)+`, `(ab|a)*`: exponential), and the constructs whose time has no such
bound (backreferences, lookarounds, conditionals, atomic groups, possessive repeats; RE2 reads none of them). Module
names are ASCII, where the two engines agree.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bringup.errors import BringupError
from bringup.runner.weights.formats.compressed_tensors.ignore_rules import PATTERN_PREFIX, IgnoreRules, Matcher
from bringup.terminal_text import shown

try:
    from re import _constants as sre
    from re import _parser as sre_parse
except ImportError:  # Python 3.10
    import sre_constants as sre  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

MAX_IGNORE_RULES = 4096
MAX_PATTERNS = 32  # `re:` entries, each tried on every linear module (names are looked up in a set)
MAX_PATTERN_CHARS = 256
NAME_CHARS = 64  # the length a module name is counted with; bringup's longest (an expert's projection) is ~50
MAX_WAYS = 2**14
MAX_TOTAL_WAYS = 2**16  # Python's `re` spends up to ~10 ns a way: under a millisecond a module, all patterns tried
UNBOUNDED_MEANING = "at most two unbounded repeats such as .* or [a-z]+ in a row"
WHAT_TO_DO = "fix config.json: list the module names, or use a simpler pattern"
PLAIN = {sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN, sre.AT}
VARIABLE_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT}
UNBOUNDED_CONSTRUCTS = {"GROUPREF": "a backreference", "GROUPREF_EXISTS": "a conditional group",
                        "ASSERT": "a lookahead or lookbehind", "ASSERT_NOT": "a negative lookahead or lookbehind",
                        "ATOMIC_GROUP": "an atomic group", "POSSESSIVE_REPEAT": "a possessive repeat"}


class PatternRefused(ValueError):
    """Why a pattern is refused, as a phrase; `backtracking`: only because `re` would match it (RE2 would not)."""

    def __init__(self, why: str, backtracking: bool = False) -> None:
        super().__init__(why)
        self.backtracking = backtracking


def read_ignore(ignore: Any, where: Path) -> IgnoreRules:
    """config.json's `ignore`: a list of module names and `re:<pattern>` entries; BringupError naming the entry
    and the rule it breaks."""
    if ignore is None:
        return IgnoreRules()
    if not isinstance(ignore, list) or not all(isinstance(name, str) for name in ignore):
        raise BringupError(f"{where}: quantization_config ignore must be a list of module names, got "
                           f"{_shown(ignore)}; fix config.json")
    if len(ignore) > MAX_IGNORE_RULES:
        raise BringupError(f"{where}: quantization_config ignore has {len(ignore)} entries, more than the "
                           f"{MAX_IGNORE_RULES} bringup reads; fix config.json")
    patterns = [rule.removeprefix(PATTERN_PREFIX) for rule in ignore if rule.startswith(PATTERN_PREFIX)]
    if len(patterns) > MAX_PATTERNS:
        raise BringupError(f"{where}: quantization_config ignore has {len(patterns)} `re:` patterns, more than the "
                           f"{MAX_PATTERNS} bringup matches (each is tried on every linear module); {WHAT_TO_DO}")
    engine = linear_time_engine()
    matchers: list[Matcher] = []
    total = 0
    for pattern in dict.fromkeys(patterns):
        try:
            matcher, ways = compile_pattern(pattern, engine)
        except PatternRefused as exc:
            raise BringupError(f"{where}: quantization_config ignore entry {_shown(PATTERN_PREFIX + pattern)} "
                               f"{exc}; {WHAT_TO_DO}{_re2_hint(engine) if exc.backtracking else ''}") from None
        matchers.append(matcher)
        total += ways
    if total > MAX_TOTAL_WAYS:
        raise BringupError(f"{where}: quantization_config ignore's {len(patterns)} `re:` patterns give {total:,} ways "
                           f"to match a {NAME_CHARS}-character name together, more than the {MAX_TOTAL_WAYS:,} bringup "
                           f"matches (each is tried on every linear module); {WHAT_TO_DO}{_re2_hint(engine)}")
    names = frozenset(rule for rule in ignore if not rule.startswith(PATTERN_PREFIX))
    return IgnoreRules(names, tuple(dict.fromkeys(patterns)), tuple(matchers))


def linear_time_engine() -> Any | None:
    """The `re2` module of google-re2, or None when it is not installed."""
    try:
        import re2
    except ImportError:
        return None
    return re2


def compile_pattern(pattern: str, engine: Any | None) -> tuple[Matcher, int]:
    """`pattern`'s matcher and the ways it may try on a name (0 for RE2: linear time); PatternRefused when it is too
    long, is not a regular expression (Python's syntax: the one compressed-tensors uses), or `re` would match it
    without a bound."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternRefused(f"is {len(pattern)} characters long, more than the {MAX_PATTERN_CHARS} a pattern may be")
    try:
        tree = sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        raise PatternRefused(f"is not a regular expression ({shown(exc)})") from None
    if engine is not None:
        options = engine.Options()
        options.log_errors = False  # a pattern RE2 does not read goes to `re`, under its bound, not to stderr
        try:
            return engine.compile(pattern, options).match, 0
        except engine.error:
            pass
    ways = count_ways(tree)
    if ways > MAX_WAYS:
        raise PatternRefused(f"may take too long to match: its repeats and alternatives give over {MAX_WAYS:,} ways "
                             f"to match a {NAME_CHARS}-character name, more than bringup matches by backtracking "
                             f"({UNBOUNDED_MEANING})", backtracking=True)
    return re.compile(pattern).match, ways


def count_ways(items: Any) -> int:
    """The ways a backtracking matcher may try `items` (a parsed sequence) on a NAME_CHARS name, capped just
    above MAX_WAYS; PatternRefused for a nested repeat or a construct without a bound."""
    ways = 1
    for op, argument in items:
        if op in PLAIN:
            continue
        if op is sre.SUBPATTERN:
            part = count_ways(argument[-1])
        elif op is sre.BRANCH:
            part = sum(count_ways(branch) for branch in argument[1])
        elif op in VARIABLE_REPEATS:
            part = _repeat_ways(*argument)
        else:
            name = getattr(op, "name", str(op))
            construct = UNBOUNDED_CONSTRUCTS.get(name, name.lower())
            raise PatternRefused(f"uses {construct}, which bringup does not match (no bound on its matching time)")
        ways = min(ways * part, MAX_WAYS + 1)
    return ways


def _repeat_ways(least: int, most: int, body: Any) -> int:
    inner = count_ways(body)
    if most <= 1:  # `?` or a single copy: the body once, or not at all
        return inner + (least == 0)
    if least == most:  # `{n}`: the body n times in a row
        return min(inner ** min(least, NAME_CHARS), MAX_WAYS + 1)
    if inner > 1:
        raise PatternRefused("repeats a group that itself repeats or alternates (such as (a+)+ or (ab|a)*), whose "
                             "matching time can grow exponentially with the name's length", backtracking=True)
    return min(most, NAME_CHARS) - min(least, NAME_CHARS) + 1


def _re2_hint(engine: Any | None) -> str:
    return "" if engine is not None else (", or install google-re2 (pip install 'bringup[re2]') to match it in "
                                          "linear time")


def _shown(value: Any) -> str:
    text = shown(repr(value) if isinstance(value, str) else value)
    return text if len(text) <= 60 else text[:57] + "..."
