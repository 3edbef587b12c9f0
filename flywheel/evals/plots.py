"""PNG plots for reports: accuracy by condition (with 95% intervals) and the flywheel over time."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on workers or CI
import matplotlib.pyplot as plt  # noqa: E402


def accuracy_by_condition(table: list[dict], path: Path) -> Path:
    rows = [r for r in table if r["family"] == "all"]
    splits = sorted({r["split"] for r in rows})
    fig, axes = plt.subplots(1, max(1, len(splits)), figsize=(5 * max(1, len(splits)), 4), squeeze=False)
    for ax, split in zip(axes[0], splits, strict=False):
        sub = [r for r in rows if r["split"] == split]
        names = [r["condition"] for r in sub]
        acc = [r["accuracy"] for r in sub]
        err = [[a - r["ci95"][0] for a, r in zip(acc, sub, strict=True)],
               [r["ci95"][1] - a for a, r in zip(acc, sub, strict=True)]]
        ax.bar(range(len(sub)), acc, yerr=err, capsize=4, color="#4c72b0")
        ax.set_xticks(range(len(sub)), names, rotation=30, ha="right", fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_title(f"{split} (n={sub[0]['n'] if sub else 0})")
        ax.set_ylabel("accuracy (95% Wilson CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def flywheel_over_time(events: list[tuple[float, str]], path: Path) -> Path:
    """events: (unix seconds, "verified" | "deposited"), cumulative counts over elapsed minutes."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    t0 = min((t for t, _ in events), default=0.0)
    for kind, colour in (("verified", "#4c72b0"), ("deposited", "#55a868")):
        ts = sorted(t for t, k in events if k == kind)
        ax.step([(t - t0) / 60 for t in ts], range(1, len(ts) + 1), where="post", label=kind, color=colour)
    ax.set_xlabel("minutes since first event")
    ax.set_ylabel("cumulative count")
    ax.set_title("flywheel: verified solutions and graft-answerable artifacts")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
