"""The sliding-window rule of `bringup eval`: every token after the first scored exactly once, with the window's
earlier tokens as its context, windows of at most ctx tokens starting every stride tokens."""

from __future__ import annotations

import pytest

from bringup.errors import BringupError
from bringup.runner.eval.windows import plan_windows


@pytest.mark.parametrize(("n", "ctx", "stride"), [(2, 2, 1), (10, 4, 1), (10, 4, 3), (100, 16, 8), (100, 16, 15),
                                                    (1000, 512, 256), (513, 512, 256), (7, 512, 256), (37, 8, 5)])
def test_every_token_after_the_first_is_scored_once(n, ctx, stride):
    windows = plan_windows(n, ctx, stride)
    scored = [t for w in windows for t in range(w.first_scored, w.end)]
    assert scored == list(range(1, n))
    for i, w in enumerate(windows):
        assert w.start == i * stride and w.end == min(w.start + ctx, n)
        assert w.start < w.first_scored <= w.end  # each scored token has at least one token of context
        assert 0 <= w.first_scored_offset < w.end - w.start  # the logits predicting it are inside the window
    assert windows[-1].end == n and all(w.end < n for w in windows[:-1])  # stops at the first reaching the end


def test_exact_counts():
    windows = plan_windows(1000, 512, 256)
    assert [(w.start, w.end, w.first_scored) for w in windows] == [(0, 512, 1), (256, 768, 512), (512, 1000, 768)]
    assert [w.scored for w in windows] == [511, 256, 232]
    assert [w.first_scored_offset for w in windows] == [0, 255, 255]  # after the first: ctx - stride of context


@pytest.mark.parametrize(("n", "ctx", "stride", "word"), [(10, 4, 4, "--stride 4"), (10, 4, 0, "--stride 0"),
                                                           (10, 1, 1, "--ctx 1"), (1, 4, 2, "1 token")])
def test_refused_in_one_line(n, ctx, stride, word):
    with pytest.raises(BringupError) as info:
        plan_windows(n, ctx, stride)
    assert word in str(info.value) and "\n" not in str(info.value)
