"""Markdown tables (every figure beside its ratio to the service in the same run), PNG charts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SERVICE = "service"
TABLES = (
    "Setup",
    "Search latency, one client",
    "Search latency, concurrent clients",
    "Searches/s beside recall@10",
    "Recall@10 against exact search",
    "Recall@10 against ef_search",
    "Ingestion, chunks/s by stage",
    "Index build",
)
CHARTS = ("latency_vs_size.png", "recall_vs_ef.png")


def write_report(results: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    classes: list[str] = results["classes"]
    parts = [
        "# This service beside its alternatives\n",
        setup_section(results),
        single_client_table(results["latency"], classes) + new_text_note(results),
        concurrent_table(results["latency"], classes),
        throughput_recall_table(results["latency"], classes),
        recall_table(results["latency"], classes),
        sweep_table(results["sweep"], classes),
        ingest_table(results["stages"], results["store"]),
        index_table(results["index_builds"]),
    ]
    path = out / "report.md"
    path.write_text("\n".join(parts))
    latency_chart(results["latency"], classes, out / CHARTS[0])
    recall_chart(results["sweep"], classes, out / CHARTS[1])
    return path


def table(header: Sequence[str], rows: Sequence[Sequence[object]], right_from: int = 1) -> str:
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def ms(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 1000 else f"{value:,.0f}"


def ratio(value: float, reference: float | None) -> str:
    if not reference:
        return "—"
    r = value / reference
    if r >= 10:
        return f"{r:,.0f}x"
    return f"{r:.2f}x" if r >= 0.1 else f"{r:.2g}x"


def setup_section(results: dict[str, Any]) -> str:
    machine = results["machine"]
    versions = results["versions"]
    rows = [
        ["command", f"`{results['command']}`"],
        ["machine", f"{machine['cpus']} cores, {machine['ram_gb']} GB RAM, {machine['platform']}"],
        ["load average (start → end)", f"{machine['load_start']} → {machine['load_end']}"],
        ["commit", machine["commit"]],
        *[[name, version] for name, version in versions.items()],
        *[[f"service setting {k}", v] for k, v in results["service_settings"].items()],
        *[[f"PostgreSQL {k}", v] for k, v in results["server"].items()],
        ["Chroma HNSW", ", ".join(f"{k} {v}" for k, v in results["chroma_hnsw"].items())],
        *[
            [name, ", ".join(f"{k} {v}" for k, v in described.items())]
            for name, described in results.get("peer_stores", {}).items()
        ],
        ["data", results["data"]],
        ["queries", results["queries_note"]],
    ]
    return "## Setup\n\n" + table(["what", "value"], rows, right_from=2)


def by_key(rows: list[dict[str, Any]], *keys: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {tuple(r[k] for k in keys): r for r in rows}


def engines_in_order(rows: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r["engine"] for r in rows))


def single_client_table(latency: list[dict[str, Any]], classes: list[str]) -> str:
    """Per size: each engine's P50 / P95 / P99 per tenant size, and its P50 over the
    service's P50 at that tenant size."""
    index = by_key(latency, "size", "engine", "tenant", "clients")
    out = ["## Search latency, one client\n"]
    out.append(
        "P50 / P95 / P99 in ms, then the engine's P50 over the service's (in process) P50 at "
        "the same tenant size: above 1x the peer is slower.\n"
    )
    for size in sorted({r["size"] for r in latency}):
        rows = []
        for engine in engines_in_order(latency):
            cells: list[object] = [engine]
            for size_class in classes:
                row = index.get((size, engine, size_class, 1))
                service = index.get((size, SERVICE, size_class, 1))
                if row is None:
                    cells += ["—", "—"]
                    continue
                cells.append(f"{ms(row['p50_ms'])} / {ms(row['p95_ms'])} / {ms(row['p99_ms'])}")
                cells.append(ratio(row["p50_ms"], service["p50_ms"] if service else None))
            rows.append(cells)
        header = ["engine"]
        for size_class in classes:
            sample = index.get((size, SERVICE, size_class, 1))
            rows_note = f" ({sample['rows']:,} rows)" if sample else ""
            header += [f"{size_class}{rows_note}", "÷ service"]
        out.append(f"### {size:,} chunks\n\n" + table(header, rows))
    return "\n".join(out)


def new_text_note(results: dict[str, Any]) -> str:
    found = results.get("http_new_text")
    if not found:
        return ""
    return (
        f"\nOver HTTP with a query text new to the server (it embeds the text with the local "
        f"model; the cells above read it from its query cache), one client, "
        f"{found['n']} texts: P50 {ms(found['p50_ms'])} / P95 {ms(found['p95_ms'])} / "
        f"P99 {ms(found['p99_ms'])} ms, of which the server's embedding P50 "
        f"{ms(found['server_embed_p50_ms'])} ms (P95 {ms(found['server_embed_p95_ms'])}).\n"
    )


def concurrent_table(latency: list[dict[str, Any]], classes: list[str]) -> str:
    index = by_key(latency, "size", "engine", "tenant", "clients")
    out = ["## Search latency, concurrent clients\n"]
    out.append(
        "N clients each sending its next query when the last returns. P50 / P95 / P99 in ms, "
        "then queries per second and its ratio to the service's at the same tenant size and "
        "client count (below 1x the peer serves fewer).\n"
    )
    counts = sorted({r["clients"] for r in latency if r["clients"] > 1})
    for size in sorted({r["size"] for r in latency}):
        rows = []
        for count in counts:
            for engine in engines_in_order(latency):
                cells: list[object] = [engine, count]
                for size_class in classes:
                    row = index.get((size, engine, size_class, count))
                    service = index.get((size, SERVICE, size_class, count))
                    if row is None:
                        cells += ["—", "—"]
                        continue
                    cells.append(f"{ms(row['p50_ms'])} / {ms(row['p95_ms'])} / {ms(row['p99_ms'])}")
                    reference = service["qps"] if service else None
                    cells.append(f"{row['qps']:,.0f} ({ratio(row['qps'], reference)})")
                rows.append(cells)
        header = ["engine", "clients"]
        for size_class in classes:
            header += [size_class, "QPS (÷ service)"]
        out.append(f"### {size:,} chunks\n\n" + table(header, rows, right_from=1))
    return "\n".join(out)


def throughput_recall_table(latency: list[dict[str, Any]], classes: list[str]) -> str:
    """The comparison in one table: searches/s at the most clients measured, recall@10 of
    the same cell beside it, per tenant size; engines in order of searches/s at the largest
    tenant."""
    most = max(r["clients"] for r in latency)
    index = by_key(latency, "size", "engine", "tenant", "clients")
    out = ["## Searches/s beside recall@10\n"]
    out.append(
        f"{most} clients, each sending its next query when the last returns: searches per "
        "second, then recall@10 of the same answers against exact search.\n"
    )
    for size in sorted({r["size"] for r in latency}):
        largest = {e: index.get((size, e, classes[0], most)) for e in engines_in_order(latency)}
        order = sorted(largest, key=lambda e: -(largest[e] or {"qps": 0})["qps"])
        rows = []
        for engine in order:
            cells: list[object] = [engine]
            for size_class in classes:
                row = index.get((size, engine, size_class, most))
                cells += (
                    ["—", "—"]
                    if row is None
                    else [
                        f"{row['qps']:,.0f}",
                        f"{row['recall@10']:.3f}",
                    ]
                )
            rows.append(cells)
        header = ["engine"]
        for size_class in classes:
            header += [f"{size_class} searches/s", "recall@10"]
        out.append(f"### {size:,} chunks\n\n" + table(header, rows))
    return "\n".join(out)


def recall_table(latency: list[dict[str, Any]], classes: list[str]) -> str:
    index = by_key(latency, "size", "engine", "tenant", "clients")
    rows = []
    for size in sorted({r["size"] for r in latency}):
        for engine in engines_in_order(latency):
            cells: list[object] = [f"{size:,}", engine]
            for size_class in classes:
                row = index.get((size, engine, size_class, 1))
                cells.append("—" if row is None else f"{row['recall@10']:.3f}")
            rows.append(cells)
    return (
        "## Recall@10 against exact search\n\n"
        "Mean over the single-client queries of each cell; exact = numpy over the tenant's "
        "rows in float32.\n\n" + table(["chunks", "engine", *classes], rows, right_from=2)
    )


def sweep_table(sweep: list[dict[str, Any]], classes: list[str]) -> str:
    index = by_key(sweep, "size", "engine", "ef_search", "tenant")
    rows = []
    for size in sorted({r["size"] for r in sweep}):
        for engine in engines_in_order(sweep):
            for ef in sorted({r["ef_search"] for r in sweep if r["engine"] == engine}):
                cells: list[object] = [f"{size:,}", engine, ef]
                for size_class in classes:
                    row = index.get((size, engine, ef, size_class))
                    cells.append(
                        "—" if row is None else f"{row['recall@10']:.3f} ({ms(row['p50_ms'])})"
                    )
                rows.append(cells)
    return (
        "## Recall@10 against ef_search\n\n"
        "Recall@10, then the single-client P50 in ms, at each `ef_search` of the request "
        "(the service's default is in the setup table).\n\n"
        + table(["chunks", "engine", "ef_search", *classes], rows, right_from=2)
    )


def ingest_table(stages: dict[str, Any], store: list[dict[str, Any]]) -> str:
    service_store = {r["size"]: r["chunks_per_s"] for r in store if r["path"].startswith(SERVICE)}
    stage_rows = (
        ("parse (`parse_text`)", "parse"),
        ("chunk (`Chunker.split`)", "chunk"),
        ("parse + chunk", "parse_and_chunk"),
        ("embed (local model, `embed_documents`)", "embed"),
    )
    rows: list[list[object]] = [
        [label, "", stages[key]["chunks"], rate(stages[key]), ""] for label, key in stage_rows
    ]
    for r in store:
        if r["path"].startswith(SERVICE):
            per_chunk_s = sum(
                1 / float(m["chunks_per_s"])
                for m in (stages["parse_and_chunk"], stages["embed"], r)
            )
            share = 1 / float(stages["embed"]["chunks_per_s"]) / per_chunk_s
            rows.append(
                [
                    f"service end to end, computed: parse + chunk, embed, store one after "
                    f"another (embed {share:.0%} of the time)",
                    f"{r['size']:,}",
                    "",
                    f"{1 / per_chunk_s:.1f}",
                    ratio(1 / per_chunk_s, float(r["chunks_per_s"])),
                ]
            )
        rows.append(
            [
                f"store: {r['path']}",
                f"{r['size']:,}",
                r["chunks"],
                rate(r),
                ratio(r["chunks_per_s"], service_store.get(r["size"])),
            ]
        )
    return (
        "## Ingestion, chunks/s by stage\n\n"
        "Store: the same new chunks (vectors given) into the table or collection holding the "
        "size's rows; the last column is the rate over the service's write path at that "
        "size. Parse, chunk and embed do not depend on the size.\n\n"
        + table(["stage", "rows already stored", "chunks", "chunks/s", "÷ service store"], rows)
    )


def rate(measured: dict[str, Any]) -> str:
    value = float(measured["chunks_per_s"])
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def index_table(builds: list[dict[str, Any]]) -> str:
    reference = {r["size"]: r for r in builds if r["index"] == "pgvector HNSW, vector"}
    rows = [
        [
            f"{r['size']:,}",
            r["index"],
            r["build_s"],
            r["size_mb"],
            r["build_s_per_million"],
            r["mb_per_million"],
            ratio(r["build_s"], reference[r["size"]]["build_s"]),
            ratio(r["size_mb"], reference[r["size"]]["size_mb"]),
        ]
        for r in builds
    ]
    return (
        "## Index build\n\n"
        "m 16 / ef_construction 64 for pgvector (the migration's), maintenance_work_mem "
        "1GB; each peer store as the setup table says, its time the whole load (rows and "
        "index). Per million: scaled linearly from the measured size. A peer store's size is "
        "its whole directory (vectors, ids and metadata included); pgvector's is the index "
        "alone.\n\n"
        + table(
            [
                "chunks",
                "index",
                "build s",
                "MB",
                "s per million",
                "MB per million",
                "build ÷ vector",
                "size ÷ vector",
            ],
            rows,
            right_from=2,
        )
    )


def latency_chart(latency: list[dict[str, Any]], classes: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(classes), figsize=(4 * len(classes), 3.6), sharey=True)
    for ax, size_class in zip(axes, classes, strict=True):
        for engine in engines_in_order(latency):
            points = sorted(
                (r["size"], r["p50_ms"], r["p95_ms"])
                for r in latency
                if r["engine"] == engine and r["tenant"] == size_class and r["clients"] == 1
            )
            if not points:
                continue
            sizes = [p[0] for p in points]
            line = ax.plot(sizes, [p[1] for p in points], marker="o", label=engine)[0]
            ax.plot(sizes, [p[2] for p in points], ls=":", color=line.get_color())
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"tenant of {size_class} of the rows")
        ax.set_xlabel("chunks in the table")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("ms per query, one client (P50; dotted P95)")
    axes[-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def recall_chart(sweep: list[dict[str, Any]], classes: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({r["size"] for r in sweep})
    fig, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 3.8), squeeze=False)
    engines = engines_in_order(sweep)
    styles = dict(zip(engines, ["-", "--", "-.", ":"][: len(engines)], strict=True))
    for ax, size in zip(axes[0], sizes, strict=True):
        for color, size_class in enumerate(classes):
            for engine, style in styles.items():
                points = sorted(
                    (r["ef_search"], r["recall@10"])
                    for r in sweep
                    if r["size"] == size and r["engine"] == engine and r["tenant"] == size_class
                )
                ax.plot(
                    [p[0] for p in points],
                    [p[1] for p in points],
                    ls=style,
                    marker="o",
                    color=f"C{color}",
                    label=f"{engine}, {size_class}",
                )
        ax.axhline(0.95, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_title(f"{size:,} chunks")
        ax.set_xlabel("ef_search")
        ax.set_ylabel("recall@10")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
