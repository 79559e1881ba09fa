"""Sampling the links' utilisation over a run (docs/simulator.md).

Every ``sample_ms`` the run records the mean rate each node's link carried since the
previous sample (what the jobs in the engine sent, exact at the sample's time; what
a closed-form stretch sends, spread evenly over it): the utilisation plots.  Γ does
not use these samples (:func:`tdmcore.sim.cluster.gamma_of_links`: what each link
sent over how long it was in use), so it does not depend on ``sample_ms``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .book import Book
from .skip_ahead import SkipAhead


class LinkSampler:
    """The utilisation samples of one run."""

    def __init__(self, book: Book, skip: SkipAhead, n_nodes: int, sample_ms: float) -> None:
        self.book, self.skip = book, skip
        self.sample_ms = sample_ms
        self.next_ms = sample_ms
        self.times: list[float] = [0.0]
        self.rates: list[NDArray[np.float64]] = []
        self.last_sent = np.zeros(n_nodes)

    def sent_by_node(self, t: float | None = None) -> NDArray[np.float64]:
        """Gbit sent through each node's link by ``t`` (None: the run's end)."""
        book = self.book
        out = book.sent_by_node.copy()
        if t is not None:
            self.skip.sent_by_node(out, t)
        if book.slot:
            eng = book.engine
            if t is not None:
                eng.flush(t)
            for name, j in book.slot.items():
                sent = eng.pod_sent(j) if t is None else eng.pod_sent_at(j, t)
                np.add.at(out, book.pod_node_links[name], sent)
        return out

    def due(self, t: float) -> bool:
        return t >= self.next_ms

    def sample(self, t: float) -> None:
        """The mean rates since the previous sample, at ``t``."""
        sent = self.sent_by_node(t)
        self.rates.append((sent - self.last_sent) / ((t - self.times[-1]) * 1e-3))
        self.times.append(t)
        self.last_sent = sent
        self.next_ms = t + self.sample_ms

    def close(self, t: float) -> NDArray[np.float64]:
        """The last sample at the run's end ``t``; returns the total sent per link."""
        sent = self.sent_by_node()
        if t > self.times[-1]:
            self.rates.append((sent - self.last_sent) / ((t - self.times[-1]) * 1e-3))
            self.times.append(t)
        return sent
