"""Per-request sampling parameters (the engine API's contract)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SamplingParams:
    """temperature 0 means greedy; top_k 0 means off; logprobs = number of top alternatives per token."""

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    logprobs: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1

    def validate(self) -> None:
        """Raise ValueError("<field>: <why>") on the first out-of-range value."""
        checks = [
            ("max_tokens", self.max_tokens >= 1, "must be >= 1"),
            ("temperature", 0.0 <= self.temperature <= 100.0, "must be in [0, 100] (0 = greedy)"),
            ("top_p", 0.0 < self.top_p <= 1.0, "must be in (0, 1]"),
            ("top_k", self.top_k >= 0, "must be >= 0 (0 = off)"),
            ("min_p", 0.0 <= self.min_p <= 1.0, "must be in [0, 1]"),
            ("repetition_penalty", 0.0 < self.repetition_penalty <= 100.0, "must be in (0, 100]"),
            ("seed", self.seed is None or 0 <= self.seed < 2**63, "must be in [0, 2**63)"),
            ("stop", all(isinstance(s, str) and s for s in self.stop), "must be non-empty strings"),
            ("stop_token_ids", all(isinstance(t, int) and t >= 0 for t in self.stop_token_ids),
             "must be non-negative integers"),
            ("logprobs", self.logprobs is None or 0 <= self.logprobs <= 20, "must be in [0, 20]"),
        ]
        for name, ok, why in checks:
            if not ok:
                raise ValueError(f"{name}: {why} (got {getattr(self, name)!r})")
