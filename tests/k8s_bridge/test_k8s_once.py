"""k8s_bridge.once.Once: a repeated failure is said once per key and reason."""

from __future__ import annotations

import pytest

from k8s_bridge.once import Once


def test_said_once_per_key_and_reason_and_again_after_forget() -> None:
    once = Once()
    assert once.first("a", "x") and not once.first("a", "x")
    assert once.first("a", "y")  # a new reason
    assert once.first("a", "x")  # and back: the last one said is "y"
    assert once.first("b", "x")  # another key
    once.forget("a")
    assert once.first("a", "x")
    once.keep_only(["b"])
    assert once.first("a", "x") and not once.first("b", "x")


def test_bounded_oldest_half_dropped() -> None:
    once = Once(limit=4)
    for k in range(4):
        assert once.first(k, "r")
    assert len(once) == 4
    assert once.first(4, "r")  # full: keys 0 and 1 dropped
    assert len(once) == 3
    assert once.first(0, "r") and not once.first(3, "r")


def test_limit_is_checked() -> None:
    with pytest.raises(ValueError, match="^limit:"):
        Once(limit=1)
