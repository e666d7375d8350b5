"""The HTML report and its PNG plots (matplotlib's Agg renderer, no display needed).

Plots (under ``plots/``): per topic, the convergence curve (fraction of correct edges,
legitimacy per bucket, member count, perturbation markers as vertical lines named on a top
axis of their own), the delivery latency CDF split by ``via`` -- live deliveries, and beside
them the history copied to late joiners, on an axis linear below 1 ms and logarithmic above
it, so that 0 ms shows -- and the degree histogram (observed at the end of the data and
ideal for the same members; integer ticks); for the whole run, the message rates.  At most
`MAX_PLOTTED_TOPICS` topics are plotted; the tables hold every topic.

Every file is replaced atomically (`pubsub.ops.analysis.output.atomic_write`), PNGs before the
HTML that links them.  A report written while the analysis is still live refreshes itself
in the browser every few seconds.
"""

from __future__ import annotations

import html
import io
import re
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pubsub.ops.analysis.output import atomic_write_bytes

MAX_PLOTTED_TOPICS = 12
#: Kinds of supervisor messages drawn separately in the message-rate plot.
MAX_KINDS = 6

Rows = Sequence[Mapping[str, Any]]


def _figure(width: float = 8.0, height: float = 4.0) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _save(fig: Any, path: Path) -> None:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    atomic_write_bytes(path, buffer.getvalue())


def _no_data(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} yet", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _nan(value: Any) -> float:
    return float("nan") if value is None else float(value)


def plot_convergence(path: Path, topic: str, timeline: Rows, steps: Rows, markers: Rows) -> None:
    _save(figure_convergence(topic, timeline, steps, markers), path)


def marker_labels(markers: Rows, span: float) -> list[tuple[float, str]]:
    """(x, label) for the top axis: markers closer than 2% of the time span share a label."""
    merged: list[tuple[float, list[str]]] = []
    for m in sorted(markers, key=lambda m: m["t"]):
        action = str(m["action"])
        if merged and m["t"] - merged[-1][0] <= 0.02 * max(span, 1e-9):
            if action not in merged[-1][1]:
                merged[-1][1].append(action)
            continue
        merged.append((m["t"], [action]))
    return [(x, ", ".join(actions)) for x, actions in merged]


def figure_convergence(topic: str, timeline: Rows, steps: Rows, markers: Rows) -> Any:
    """Legitimate share per bucket (filled), and the exact step curves of the fraction of
    correct edges and of the member count (from the legitimacy_changes table); markers as
    vertical lines, named on a top axis of their own (below the title, never over it)."""
    from matplotlib.ticker import MaxNLocator

    fig = _figure(9.0, 4.6)
    ax = fig.add_subplot()
    ax.set_title(f"convergence of {topic!r}")
    if not timeline:
        _no_data(ax, "snapshots")
        return fig
    ends = [r["t_end"] for r in timeline]
    xs = [timeline[0]["t_start"], *ends]
    legit = [r["legitimate_fraction"] for r in timeline]
    ax.stairs(
        legit,
        xs,
        fill=True,
        alpha=0.25,
        color="tab:green",
        label="legitimate (share of bucket)",
    )
    last_t = max(ends[-1], steps[-1]["t"]) if steps else ends[-1]
    step_x = [r["t"] for r in steps] + [last_t]
    fractions = [
        _nan(
            r["correct_edges"] / r["compared_edges"]
            if r["compared_edges"]
            else (1.0 if r["members"] else None)
        )
        for r in steps
    ]
    ax.step(
        step_x,
        fractions + fractions[-1:],
        where="post",
        color="tab:blue",
        lw=1.5,
        label="fraction of correct edges",
    )
    ax.set_ylim(-0.02, 1.05)
    ax.set_xlim(xs[0], last_t)
    ax.set_xlabel("seconds since the first event")
    ax.set_ylabel("fraction")
    right = ax.twinx()
    members = [r["members"] for r in steps]
    right.step(
        step_x, members + members[-1:], where="post", color="0.45", lw=1, label="members"
    )
    right.set_ylabel("members")
    right.set_ylim(0, max(members, default=0) * 1.1 + 1)
    right.yaxis.set_major_locator(MaxNLocator(integer=True))
    for m in markers:
        ax.axvline(m["t"], color="tab:red", ls="--", lw=1)
    labels = marker_labels(markers, last_t - xs[0])
    if labels:
        top = ax.secondary_xaxis("top")
        top.set_xticks([x for x, _ in labels], labels=[text for _, text in labels])
        top.tick_params(axis="x", labelrotation=90, labelsize=7, colors="tab:red", length=3)
    handles = ax.get_legend_handles_labels()
    extra = right.get_legend_handles_labels()
    ax.legend(handles[0] + extra[0], handles[1] + extra[1], loc="lower right", fontsize=8)
    return fig


def plot_latency(path: Path, topic: str, cdf: Rows) -> None:
    _save(figure_latency(topic, cdf), path)


#: Below this many milliseconds the latency axis is linear (so 0 ms is on it), above it
#: logarithmic (so 5 ms and 5 s both read well).
LINEAR_BELOW_MS = 1.0


def _latency_axis(ax: Any, curves: dict[str, list[tuple[float, float]]], title: str) -> None:
    ax.set_title(title, fontsize=10)
    for via in sorted(curves, key=lambda v: (v == "all", v)):
        points = sorted(curves[via], key=lambda p: p[1])
        style = {"color": "black", "ls": ":"} if via == "all" else {}
        ax.plot([p[0] for p in points], [p[1] for p in points], label=via, **style)
    values = [p[0] for points in curves.values() for p in points]
    ax.set_xscale("symlog", linthresh=LINEAR_BELOW_MS, linscale=0.5)
    ax.set_xlim(left=min(0.0, min(values)), right=max(max(values) * 1.5, LINEAR_BELOW_MS * 2))
    ax.set_xlabel("latency (ms): delivered - published")
    ax.set_ylabel("cumulative fraction")
    ax.set_ylim(0, 1.02)
    ax.legend(title="via", fontsize=8)
    ax.grid(alpha=0.3)


def figure_latency(topic: str, cdf: Rows) -> Any:
    """The latency CDF (101 quantiles) by `via`: live deliveries, and beside them -- never
    mixed in -- the history copied to nodes that joined after the publication
    (`pubsub.ops.analysis.latency`).  The axis is linear below 1 ms and logarithmic above,
    so 0 ms shows."""
    curves: dict[str, dict[str, list[tuple[float, float]]]] = {"live": defaultdict(list), "history": defaultdict(list)}
    for r in cdf:
        if r["latency"] is not None:
            kind = r.get("delivery") or "live"
            curves.setdefault(kind, defaultdict(list))[r["via"]].append((r["latency"] * 1000.0, r["fraction"]))
    live, history = curves["live"], curves["history"]
    fig = _figure(11.0 if history else 7.0, 4.2)
    if not live and not history:
        ax = fig.add_subplot()
        ax.set_title(f"delivery latency of {topic!r}")
        _no_data(ax, "deliveries")
        return fig
    fig.suptitle(f"delivery latency of {topic!r} (CDF)")
    axes = fig.subplots(1, 2) if history else [fig.add_subplot()]
    if live:
        _latency_axis(axes[0], live, "live deliveries")
    else:
        axes[0].set_title("live deliveries", fontsize=10)
        _no_data(axes[0], "live deliveries")
    if history:
        _latency_axis(axes[1], history, "history copied to late joiners")
    return fig


def plot_degrees(path: Path, topic: str, degrees: Rows) -> None:
    _save(figure_degrees(topic, degrees), path)


def figure_degrees(topic: str, degrees: Rows) -> Any:
    """Observed and ideal degree histogram; both axes count whole things (integer ticks)."""
    from matplotlib.ticker import MaxNLocator

    fig = _figure(6.0, 3.6)
    ax = fig.add_subplot()
    ax.set_title(f"degree distribution of {topic!r} (end of data)")
    if not degrees:
        _no_data(ax, "members")
        return fig
    xs = [r["degree"] for r in degrees]
    ax.bar([x - 0.2 for x in xs], [r["nodes"] for r in degrees], width=0.4, label="observed")
    ax.bar(
        [x + 0.2 for x in xs],
        [r["ideal_nodes"] for r in degrees],
        width=0.4,
        label="ideal SR(n)",
        color="none",
        edgecolor="tab:orange",
        hatch="//",
    )
    ax.set_xlabel("degree (distinct neighbours)")
    ax.set_ylabel("nodes")
    ax.set_xticks(list(range(min(xs), max(xs) + 1)))
    ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8)
    return fig


def message_series(sent: Rows) -> tuple[list[float], dict[str, list[float]], dict[str, list[float]]]:
    """Frames sent per second at the end of every bucket from the first to the last with
    a row: (bucket ends, per role, per supervisor message kind).  A bucket without a row
    had no frames of that role or kind, so it is 0 -- not a line drawn straight across it,
    which would show traffic that was not there."""
    ends = {r["bucket"]: r["t_end"] for r in sent}
    width = sent[0]["t_end"] - sent[0]["t_start"]
    first = min(ends)
    xs = [ends.get(b, ends[first] + (b - first) * width) for b in range(first, max(ends) + 1)]
    per_role: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(xs))
    per_kind: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(xs))
    for r in sent:
        per_role[r["role"]][r["bucket"] - first] += r["frames_per_second"]
        if r["role"] == "supervisor":
            per_kind[r["kind"]][r["bucket"] - first] += r["frames_per_second"]
    return xs, dict(per_role), dict(per_kind)


def plot_messages(path: Path, rates: Rows, markers: Rows) -> None:
    fig = _figure(9.0, 6.0)
    top, bottom = fig.subplots(2, 1, sharex=True)
    top.set_title("messages sent per second")
    sent = [r for r in rates if r["direction"] == "sent"]
    if not sent:
        _no_data(top, "message counts")
        _no_data(bottom, "supervisor messages")
        _save(fig, path)
        return
    xs, per_role, per_kind = message_series(sent)
    for role, ys in sorted(per_role.items()):
        top.plot(xs, ys, label=role, marker=".", ms=3)
    top.set_ylabel("frames/s (all daemons of a role)")
    top.legend(fontsize=8)
    top.grid(alpha=0.3)
    bottom.set_title("supervisor messages per second, by kind")
    if not per_kind:
        _no_data(bottom, "supervisor messages")
    else:
        totals = sorted(per_kind, key=lambda k: -sum(per_kind[k]))
        for kind in totals[:MAX_KINDS]:
            bottom.plot(xs, per_kind[kind], label=kind, marker=".", ms=3)
        bottom.set_ylabel("frames/s")
        bottom.legend(fontsize=8)
        bottom.grid(alpha=0.3)
    bottom.set_xlabel("seconds since the first event")
    for m in markers:
        for ax in (top, bottom):
            ax.axvline(m["t"], color="tab:red", ls="--", lw=0.8)
    _save(fig, path)


def safe_name(index: int, topic: str) -> str:
    """A file-name fragment for a topic: its index plus a sanitised prefix of its name."""
    return f"{index:02d}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', topic)[:40]}"


def plot_paths(topics: Sequence[str]) -> dict[str, dict[str, str]]:
    """{topic or "": {plot kind: path relative to the output directory}}."""
    made: dict[str, dict[str, str]] = {}
    for i, topic in enumerate(topics[:MAX_PLOTTED_TOPICS]):
        stem = safe_name(i, topic)
        made[topic] = {
            kind: f"plots/{kind}-{stem}.png" for kind in ("convergence", "latency", "degrees")
        }
    made[""] = {"messages": "plots/messages.png"}
    return made


def write_plots(
    out: Path, tables: Mapping[str, Rows], topics: Sequence[str]
) -> dict[str, dict[str, str]]:
    """Every PNG; returns `plot_paths`."""
    by_topic: dict[str, dict[str, list[Mapping[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for name in (
        "convergence_timeline",
        "legitimacy_changes",
        "latency_cdf",
        "degree_distribution",
    ):
        for row in tables.get(name, []):
            by_topic[row["topic"]][name].append(row)
    markers = tables.get("markers", [])
    made = plot_paths(topics)
    for topic in topics[:MAX_PLOTTED_TOPICS]:
        files = made[topic]
        mine = [m for m in markers if m["topic"] in (None, topic)]
        plot_convergence(
            out / files["convergence"],
            topic,
            by_topic[topic]["convergence_timeline"],
            by_topic[topic]["legitimacy_changes"],
            mine,
        )
        plot_latency(out / files["latency"], topic, by_topic[topic]["latency_cdf"])
        plot_degrees(out / files["degrees"], topic, by_topic[topic]["degree_distribution"])
    plot_messages(out / made[""]["messages"], tables.get("message_rates", []), markers)
    return made


# ------------------------------------------------------------------------------ HTML
def _fmt(value: Any, unit: str = "", digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}{unit}"
    return f"{value}{unit}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    if not rows:
        return f"<table><tr>{head}</tr><tr><td colspan='{len(headers)}'>none</td></tr></table>"
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _img(src: str, alt: str, version: str) -> str:
    return f"<img src='{html.escape(src)}?v={version}' alt='{html.escape(alt)}'>"


def _latency_table(latency: Mapping[str, Mapping[str, Any]]) -> str:
    return _table(
        ["via", "deliveries", "p50 (ms)", "p90 (ms)", "p99 (ms)", "max (ms)"],
        [
            [
                via,
                q["count"],
                *(_fmt(None if q[k] is None else q[k] * 1000, "", 2) for k in ("p50", "p90", "p99", "max")),
            ]
            for via, q in latency.items()
        ],
    )


def render_html(summary: Mapping[str, Any], plots: Mapping[str, Mapping[str, str]]) -> str:
    final = bool(summary.get("final"))
    version = str(int(summary.get("generated_at", 0)))
    settings = summary.get("settings", {})
    span = summary.get("time", {})
    generated = summary.get("generated_at", 0)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "" if final else "<meta http-equiv='refresh' content='5'>",
        "<title>pubsub convergence report</title><style>",
        "body{font-family:sans-serif;margin:1.5em;max-width:1100px}"
        "table{border-collapse:collapse;margin:.5em 0 1em}"
        "td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}"
        "th{background:#eee}img{max-width:100%;display:block;margin:.5em 0}"
        ".bad{color:#b00}.note{color:#555;font-size:90%}",
        "</style></head><body>",
        "<h1>Convergence report</h1>",
        f"<p>Run <code>{html.escape(str(summary.get('run_dir')))}</code> — "
        f"{'final' if final else '<b>live, still updating</b>'}; generated "
        f"{html.escape(time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(generated)))}; "
        f"{_fmt(span.get('seconds'), ' s', 1)} of events in {summary.get('batches', 0)} "
        "micro-batch(es); "
        f"buckets of {_fmt(settings.get('bucket_seconds'), ' s')}, stability window "
        f"{_fmt(settings.get('stable_seconds'), ' s')}.</p>",
    ]
    inp = summary.get("input", {})
    unusable = inp.get("unusable", {})
    parts.append("<h2>Input</h2>")
    parts.append(
        _table(
            ["events used", *sorted(inp.get("by_kind", {})), *sorted(unusable)],
            [
                [
                    inp.get("events_used", 0),
                    *(v for _, v in sorted(inp.get("by_kind", {}).items())),
                    *(v for _, v in sorted(unusable.items())),
                ]
            ],
        )
    )
    for warning in summary.get("warnings", []):
        parts.append(f"<p class='bad'>{html.escape(warning)}</p>")

    topics = summary.get("topics", {})
    parts.append("<h2>Topics</h2>")
    parts.append(
        _table(
            [
                "topic",
                "members at end",
                "legitimate at end",
                "legitimate share of time",
                "correct edges at end",
                "perturbations",
                "converged after all",
            ],
            [
                [
                    name,
                    t.get("members_at_end"),
                    _fmt(t.get("legitimate_at_end")),
                    _fmt(t.get("legitimate_fraction")),
                    _fmt(t.get("correct_fraction_at_end")),
                    len(t.get("convergence", [])),
                    _fmt(
                        all(c["reached"] for c in t.get("convergence", []))
                        if t.get("convergence")
                        else None
                    ),
                ]
                for name, t in topics.items()
            ],
        )
    )
    for name, t in topics.items():
        parts.append(f"<h2>Topic {html.escape(repr(name))}</h2>")
        files = plots.get(name, {})
        parts.append("<h3>Time to legitimacy after each marker</h3>")
        parts.append(
            _table(
                ["marker", "action", "at (s)", "time to legitimacy (s)"],
                [
                    [
                        c["marker_id"],
                        c["action"],
                        _fmt(c["marker_t"]),
                        _fmt(c["time_to_legitimacy"]) if c["reached"] else "not reached",
                    ]
                    for c in t.get("convergence", [])
                ],
            )
        )
        if "convergence" in files:
            parts.append(_img(files["convergence"], f"convergence of {name}", version))
        parts.append("<h3>Delivery latency: live deliveries</h3>")
        parts.append(_latency_table(t.get("latency", {})))
        history = t.get("latency_history", {})
        if history:
            parts.append("<h3>History copied to late joiners</h3>")
            parts.append(
                "<p class='note'>Publications a node received because it joined (or came back) "
                "after they were published: their \"latency\" is the publication's age when it "
                "arrived, not how fast the system delivers, so they are kept apart.</p>"
            )
            parts.append(_latency_table(history))
        if "latency" in files:
            parts.append(_img(files["latency"], f"latency CDF of {name}", version))
        parts.append("<h3>Degrees at the end of the data</h3>")
        degree = t.get("degree", {})
        seen, ideal = degree.get("distribution", {}), degree.get("ideal_distribution", {})
        parts.append(
            _table(
                ["degree", "nodes", "nodes in the ideal ring"],
                [[int(k), seen.get(k, 0), ideal.get(k, 0)] for k in sorted({*seen, *ideal}, key=int)],
            )
        )
        if "degrees" in files:
            parts.append(_img(files["degrees"], f"degree histogram of {name}", version))
    if len(topics) > MAX_PLOTTED_TOPICS:
        parts.append(
            f"<p class='note'>Plots show the first {MAX_PLOTTED_TOPICS} topics; "
            "the tables hold all of them.</p>"
        )

    sup = summary.get("supervisor_messages", {})
    parts.append("<h2>Messages</h2>")
    parts.append(
        f"<p>Supervisor: {sup.get('intervals', 0)} intervals, "
        f"{_fmt(sup.get('mean_sent_per_interval'), '', 2)} messages sent per interval on average, "
        f"at most {_fmt(sup.get('max_sent_per_interval'))}.</p>"
    )
    if "" in plots:
        parts.append(_img(plots[""]["messages"], "message rates", version))
    checks = summary.get("status_checks", {})
    if checks.get("count"):
        parts.append(
            f"<p>Status checks by the experiment runner: {checks['count']}, "
            f"{checks['agree']} agree with the analysis.</p>"
        )
    parts.append(
        "<h2>Definitions</h2><ul class='note'>"
        "<li>The state of a topic at time t is each node's latest snapshot at or before t; its "
        "members are the nodes whose latest snapshot says member; a crash marker ends its "
        "targets' state.</li>"
        "<li>Legitimate: labels are exactly l(0..n-1), every member's left, right, ring and "
        "shortcuts equal the ideal skip ring SR(n) of the members (paper §2.1), and all "
        "members report the same trie root.</li>"
        "<li>Fraction of correct edges: edge slots (left, right, ring, each shortcut label) "
        "holding the ideal contact, over the slots the ideal or the node fills.</li>"
        "<li>Delivery latency: delivered - published.  A delivery is <i>history</i> when the "
        "publication is older than the receiving node's current membership of the topic (it "
        "joined, or came back after a crash, later): such copies are shown apart from the "
        "<i>live</i> deliveries.</li>"
        "<li>Time to legitimacy: from a marker to the first instant from which the topic stays "
        "legitimate for the stability window (or to the end of the data). A marker without a "
        "topic applies to every topic.</li>"
        "<li>Tables (Parquet) are in <code>tables/</code>; machine-readable summary in "
        "<code>summary.json</code>.</li></ul>"
    )
    parts.append("</body></html>\n")
    return "\n".join(p for p in parts if p)


def write_report(
    out: Path, summary: Mapping[str, Any], tables: Mapping[str, Rows], replot: bool = True
) -> dict[str, Any]:
    """PNGs (unless ``replot`` is false and they exist), then report.html; returns the plot
    paths (relative to ``out``)."""
    topics = list(summary.get("topics", {}))
    plots = write_plots(out, tables, topics) if replot else plot_paths(topics)
    if not all((out / p).exists() for files in plots.values() for p in files.values()):
        plots = write_plots(out, tables, topics)
    atomic_write_bytes(out / "report.html", render_html(summary, plots).encode())
    return plots
