"""Say a repeated failure once per object and reason.

kube-scheduler retries an unschedulable pod, and the standalone scheduler retries
every 0.5 s, so the same refusal comes back many times; a log line or an Event is
worth writing only when it says something new.  :class:`Once` is the one rule for
that, used by the extender's pipeline and the standalone scheduler.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

__all__ = ["Once"]


class Once:
    """The last reason said per key: :meth:`first` is true the first time a key
    comes with a reason, and again only when the reason changes.

    Key by the object's UID where there is one, so that an object deleted and created
    again under the same name is new.  At most ``limit`` keys are kept (the oldest
    half is dropped beyond it), so an unbounded stream of objects cannot grow it.
    """

    def __init__(self, limit: int = 4096) -> None:
        if limit < 2:
            raise ValueError(f"limit: expected at least 2, got {limit}")
        self.limit = limit
        self._said: dict[Hashable, str] = {}

    def first(self, key: Hashable, reason: str) -> bool:
        """Record ``reason`` for ``key``; true when it was not the last one said."""
        if self._said.get(key) == reason:
            return False
        self._said.pop(key, None)  # re-inserted last: the newest
        if len(self._said) >= self.limit:
            for old in list(self._said)[: self.limit // 2]:
                del self._said[old]
        self._said[key] = reason
        return True

    def forget(self, key: Hashable) -> None:
        """The object is fine (or gone): its next failure is new."""
        self._said.pop(key, None)

    def keep_only(self, keys: Iterable[Hashable]) -> None:
        """Forget every key not in ``keys`` (the objects still concerned)."""
        live = set(keys)
        for key in [k for k in self._said if k not in live]:
            del self._said[key]

    def __len__(self) -> int:
        return len(self._said)
