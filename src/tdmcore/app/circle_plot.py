"""Drawing the traffic circle of a link (paper Figs. 1c and 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.colors import to_rgba

from ..metronome.link import LinkPlan

__all__ = ["draw_traffic_circle", "plot_traffic_circle"]


def draw_traffic_circle(ax: Any, plan: LinkPlan, rotations: np.ndarray, title: str) -> None:
    """Draw ``plan``'s traffic circle at ``rotations`` on the polar axes ``ax``.

    One ring per job, the first deployed innermost (its comm arcs, shaded by the
    share of ``B`` they use: pale for little, solid for all of it) and an outer red
    ring where the summed demand exceeds the capacity.  The legend says all of it:
    one entry per job (its ring, counted from the centre, and its rotation), the
    two ends of the shading, and "over capacity" when some bin is; its entries
    are added as labelled proxies, and the caller places the legend.  Only bins
    that carry traffic are drawn (a few patches per arc, not one per bin).
    """
    n = plan.bins
    width = 2 * np.pi / n
    theta = np.arange(n) * width
    colors = [f"C{i % 10}" for i in range(len(plan.jobs))]
    for row, (job, rot) in enumerate(zip(plan.jobs, rotations, strict=True)):
        share = np.roll(plan.demand[row], int(rot)) / plan.capacity_gbps
        busy = share > 0
        inner = 1.0 + row * 0.35
        rgba = np.tile(to_rgba(colors[row]), (int(busy.sum()), 1))
        rgba[:, 3] = 0.25 + 0.75 * np.clip(share[busy], 0, 1)  # shade by the share of B
        ax.bar(theta[busy], 0.3, width=width, bottom=inner, align="edge", color=rgba,
               linewidth=0)
        ax.plot([], [], color=colors[row], linewidth=6,
                label=f"{job}: ring {row + 1} from the centre, rotation {int(rot)}")
    for alpha, what in ((0.25, "pale: a bin using little of the link"),
                        (1.0, "solid: a bin using all of the link (B)")):
        ax.plot([], [], color=to_rgba("grey", alpha), linewidth=6, label=f"shade {what}")
    total = sum(np.roll(plan.demand[r], int(s)) for r, s in enumerate(rotations))
    over = np.clip(total - plan.capacity_gbps, 0, None) > 1e-9 * plan.capacity_gbps
    outer = 1.0 + len(plan.jobs) * 0.35 + 0.1
    if over.any():
        ax.bar(theta[over], 0.25, width=width, bottom=outer, align="edge", color="red",
               linewidth=0)
        ax.plot([], [], color="red", linewidth=6, label="outer red ring: over capacity")
    ax.set_theta_zero_location("N")
    ax.set_theta_direction(-1)
    ax.set_yticks([])
    ax.set_xticks(np.linspace(0, 2 * np.pi, 8, endpoint=False))
    ax.set_xticklabels([f"{plan.base.period_ms * f:.0f} ms" for f in np.linspace(0, 1, 8,
                                                                                 endpoint=False)],
                       fontsize=7)
    ax.set_ylim(0, outer + 0.3)
    ax.set_title(title, fontsize=10)


def plot_traffic_circle(plan: LinkPlan, path: str | Path) -> Path:
    """Write a PNG: the circle unshifted and with the chosen rotations, and the load.

    One ring per job (its comm arcs, shaded by the share of ``B`` they use), an
    outer red ring where the summed demand exceeds the capacity, and below, the
    summed demand per bin against ``B`` for both cases.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    zero = np.zeros(len(plan.jobs), dtype=np.int64)
    fig = plt.figure(figsize=(11, 8.5))
    ax1 = fig.add_subplot(2, 2, 1, projection="polar")
    ax2 = fig.add_subplot(2, 2, 2, projection="polar")
    draw_traffic_circle(ax1, plan, zero, f"unshifted: score {plan.unshifted_score:.1f}, "
                                         f"xi {plan.unshifted_utilization:.3f}")
    draw_traffic_circle(ax2, plan, plan.result.rotations,
                        f"tdmcore ({plan.result_mode}): score {plan.result.score:.1f}, "
                        f"xi {plan.utilization:.3f}")
    ax2.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
    ax3 = fig.add_subplot(2, 1, 2)
    x = np.arange(plan.bins + 1) / plan.bins * plan.base.period_ms
    for rotations, label, style in ((zero, "unshifted", "--"),
                                    (plan.result.rotations, "tdmcore", "-")):
        total = sum(np.roll(plan.demand[r], int(s)) for r, s in enumerate(rotations))
        ax3.step(x, np.append(total, total[-1]), where="post", linestyle=style, label=label,
                 linewidth=2 if style == "-" else 1.2)
    ax3.axhline(plan.capacity_gbps, color="red", linewidth=1, linestyle=":",
                label="capacity B")
    ax3.set_xlabel(f"time within the base period T = {plan.base.period_ms:.1f} ms")
    ax3.set_ylabel("demand (Gbps)")
    ax3.legend(fontsize=8)
    fig.suptitle(f"traffic circle of a {plan.capacity_gbps:g} Gbps link, "
                 f"{len(plan.jobs)} jobs, {plan.bins} bins")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
