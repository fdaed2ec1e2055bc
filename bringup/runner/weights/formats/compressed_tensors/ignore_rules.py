"""A compressed-tensors checkpoint's `ignore` rules, each a module name or `re:<pattern>`, and which linear modules
they leave unquantized. The patterns arrive compiled and bounded (compressed_tensors/ignore_patterns.py); each
module's answer is worked out once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

PATTERN_PREFIX = "re:"

Matcher = Callable[[str], object]  # the pattern's match at the start of a name (as `re.match`), or None


@dataclass(frozen=True)
class IgnoreRules:
    names: frozenset[str] = frozenset()
    patterns: tuple[str, ...] = ()  # as written, without their `re:` prefix
    matchers: tuple[Matcher, ...] = field(default=(), repr=False, compare=False)  # one per pattern
    _answers: dict[str, bool] = field(default_factory=dict, init=False, repr=False, compare=False)

    def ignores(self, module: str) -> bool:
        """Whether a rule names `module` (e.g. model.layers.0.mlp.down_proj) or a pattern matches its start."""
        answer = self._answers.get(module)
        if answer is None:
            answer = module in self.names or any(match(module) is not None for match in self.matchers)
            self._answers[module] = answer
        return answer
