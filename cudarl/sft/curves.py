"""Loss curves of a training run: the trainer's log history as JSON and as a PNG.

Why both: the JSON is what a comparison or a test reads; the PNG is what a person looks at
first. Drawn with matplotlib's non-interactive backend (no display is needed)."""

from __future__ import annotations

import json
from pathlib import Path


def loss_points(history: list[dict]) -> dict[str, list[tuple[int, float]]]:
    """(step, loss) pairs: training loss and held-out loss, from ``Trainer.state.log_history``."""
    return {"train": [(int(e["step"]), float(e["loss"])) for e in history if "loss" in e and "step" in e],
            "held_out": [(int(e["step"]), float(e["eval_loss"])) for e in history if "eval_loss" in e and "step" in e]}


def write_loss_curves(history: list[dict], json_path: Path, png_path: Path, title: str) -> dict:
    """Write both files; returns the points. The JSON is written first (it survives a plotting failure)."""
    points = loss_points(history)
    json_path.write_text(json.dumps({"title": title, **points, "log_history": history}, indent=2) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for name, series in points.items():
        if series:
            steps, losses = zip(*series)
            axes.plot(steps, losses, marker="o" if name == "held_out" else None, label=name.replace("_", "-"))
    axes.set_xlabel("optimizer step")
    axes.set_ylabel("loss (completion tokens)")
    axes.set_title(title)
    axes.legend()
    figure.tight_layout()
    figure.savefig(png_path, dpi=100)
    plt.close(figure)
    return points
