"""The saturation results as a table and a chart (searches/s against concurrency)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.kit.report import print_table

CORES_NOTE = "utilisation: searches/s x CPU ms per search (all parts) / 1000 / cores"


def run_table(runs: list[dict[str, Any]], cores: int) -> None:
    rows = []
    for r in runs:
        if r["engine"] == "profile":
            continue
        cpu = r["cpu_ms_per_request"]
        total = sum(cpu.values())
        rows.append(
            (
                r["engine"],
                r["series"],
                r["clients"],
                r["per_second"],
                r["p50_ms"],
                r["p95_ms"],
                r["p99_ms"],
                r["errors"],
                " / ".join(f"{v:.1f}" for v in cpu.values()),
                round(total, 2),
                f"{r['per_second'] * total / 1000 / cores:.0%}",
            )
        )
    print_table(
        f"Searches per second at saturation ({CORES_NOTE})",
        [
            "engine",
            "series",
            "clients",
            "searches/s",
            "P50 ms",
            "P95 ms",
            "P99 ms",
            "errors",
            "CPU ms/search (parts)",
            "CPU ms",
            "utilisation",
        ],
        rows,
    )


def chart(runs: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for r in runs:
        if r["engine"] != "profile":
            lines.setdefault((r["engine"], r["series"]), []).append((r["clients"], r["per_second"]))
    figure, axes = plt.subplots(figsize=(8, 6))
    colours = {series: f"C{i}" for i, series in enumerate(dict.fromkeys(s for _, s in lines))}
    for (engine, series), points in lines.items():
        clients, rates = zip(*sorted(points), strict=True)
        style = (
            "-."
            if "per tenant" in engine
            else ":"
            if "Chroma" in engine
            else "-"
            if "2 workers" in engine
            else "--"
        )
        label = f"{engine}: {series}"
        axes.plot(clients, rates, style, color=colours[series], marker="o", label=label)
    axes.set_xscale("log", base=2)
    ticks = sorted({r["clients"] for r in runs if "clients" in r})
    axes.set_xticks(ticks, [str(t) for t in ticks])
    axes.set_xlabel("closed-loop clients")
    axes.set_ylabel("searches per second")
    axes.set_title("Searches per second at saturation (2 cores, 100k chunks)")
    axes.grid(alpha=0.3)
    # below the axes: inside, it hid a line whatever the corner
    axes.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.13))
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
