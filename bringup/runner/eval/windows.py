"""The sliding windows a text is scored in (Hugging Face's perplexity recipe, every token after the first once).

Window w holds the tokens [w * stride, min(w * stride + ctx, n)). Its logits at position p predict token p + 1,
so a window can predict the tokens after its first, up to its last. Each token is scored by the first window
that predicts it: window w scores the tokens from the previous window's end to its own end, each with every
earlier token of the window as its context (at least ctx - stride tokens, except in the first window). Windows
stop at the first that reaches the text's end. stride < ctx keeps one token of overlap, so no token is skipped
(with stride == ctx the first token of each window would have no context in it).
"""

from __future__ import annotations

from dataclasses import dataclass

from bringup.errors import BringupError


@dataclass(frozen=True)
class Window:
    start: int  # first token of the window (context only)
    end: int  # one past the window's last token
    first_scored: int  # first token this window scores; it scores [first_scored, end)

    @property
    def scored(self) -> int:
        return self.end - self.first_scored

    @property
    def first_scored_offset(self) -> int:
        """The position in the window whose logits predict `first_scored`."""
        return self.first_scored - 1 - self.start


def plan_windows(n_tokens: int, ctx: int, stride: int) -> list[Window]:
    check_window_sizes(ctx, stride)
    if n_tokens < 2:
        raise BringupError(f"eval text: {n_tokens} token(s) leave nothing to score; give a text of at least two "
                           "tokens (--text FILE, or raise --max-tokens)")
    windows: list[Window] = []
    scored_to = 1
    start = 0
    while scored_to < n_tokens:
        end = min(start + ctx, n_tokens)
        windows.append(Window(start, end, scored_to))
        scored_to = end
        start += stride
    return windows


def check_window_sizes(ctx: int, stride: int) -> None:
    if ctx < 2:
        raise BringupError(f"--ctx {ctx}: a window needs at least 2 tokens; give --ctx 2 or more (e.g. 512)")
    if not 1 <= stride < ctx:
        raise BringupError(f"--stride {stride}: windows must overlap by at least one token, so 1 <= stride < ctx "
                           f"({ctx}); give e.g. --stride {max(1, ctx // 2)}")
