"""Small PNG plots for the report (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after choosing the backend

KIND_COLORS = {"demo": "#7f7f7f", "edit": "#1f77b4", "fix": "#2ca02c", "approval": "#ff7f0e"}
DPI = 80


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def pass_rate(result: dict[str, Any], path: Path) -> Path:
    """pass@1 per task, bars coloured by kind."""
    tasks = result["metrics"]["tasks"]
    names = list(tasks)[::-1]
    fig, ax = plt.subplots(figsize=(6, 0.28 * len(names) + 1.0))
    ax.barh(
        names,
        [tasks[n]["pass_at_1"] for n in names],
        color=[KIND_COLORS.get(tasks[n]["kind"], "#444444") for n in names],
    )
    ax.set_xlim(0, 1.05)
    ax.set_xlabel(f"pass@1 over {result['metrics']['overall']['k']} repetition(s)")
    ax.set_title(f"Pass rate per task ({result['label']})", fontsize=10)
    for kind, color in KIND_COLORS.items():
        if any(t["kind"] == kind for t in tasks.values()):
            ax.bar(0, 0, color=color, label=kind)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    return _save(fig, path)


def wall_times(result: dict[str, Any], path: Path) -> Path:
    """Wall time of every episode, one box per task."""
    by_task: dict[str, list[float]] = {}
    for e in result["episodes"]:
        by_task.setdefault(e["task"], []).append(e["wall_seconds"])
    names = list(by_task)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.4 * len(names) + 1.5), 3.6))
    ax.boxplot([by_task[n] for n in names], widths=0.6)  # the default orientation: any version
    ax.set_xticks(range(1, len(names) + 1), names, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("wall time per episode (s)")
    ax.set_title(f"Wall time distribution ({result['label']})", fontsize=10)
    return _save(fig, path)


def resume_times(result: dict[str, Any], path: Path) -> Path:
    """Histogram of kill -> first new event, over runs in flight at each kill."""
    times = result["recovery"]["resume_seconds"]
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.hist(times, bins=min(30, max(5, len(times) // 4)), color="#d62728")
    ax.set_xlabel("kill -> first new event of an in-flight run (s)")
    ax.set_ylabel("runs")
    ax.set_title(f"Time to resume after SIGKILL ({result['recovery']['kills']} kills)", fontsize=10)
    return _save(fig, path)


def plot_result(result: dict[str, Any], plots_dir: Path) -> dict[str, Path]:
    """Every plot for one result, named after its label."""
    label = result["label"]
    out = {
        "pass_rate": pass_rate(result, plots_dir / f"{label}-pass-rate.png"),
        "wall_time": wall_times(result, plots_dir / f"{label}-wall-time.png"),
    }
    if result.get("recovery"):
        out["resume_time"] = resume_times(result, plots_dir / f"{label}-resume-time.png")
    return out
