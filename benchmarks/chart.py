#!/usr/bin/env python3
"""Draws benchmarks/chart.svg: delayq against its peers, one panel per metric.

    python3 benchmarks/chart.py            # from the repository's root

delayq's numbers are the medians in the newest benchmarks/results-*.json, or, where
benchmarks/peers.json says so, a newer measurement it names; the peers' numbers and the
metrics to draw are in benchmarks/peers.json. Standard library only.
"""
import glob
import json
import os
from xml.sax.saxutils import escape

HERE = os.path.dirname(os.path.abspath(__file__))
COLORS = {"delayq": "#2f6fb0", "BullMQ 6.7": "#c0504d", "Rust peer": "#8a8a8a"}
WIDTH, LEFT, RIGHT = 760, 110, 150  # LEFT: series names; RIGHT: value labels
BAR_H, BAR_GAP, PANEL_TOP, PANEL_GAP = 16, 4, 22, 18


def newest_results():
    paths = sorted(glob.glob(os.path.join(HERE, "results-*.json")))
    if not paths:
        raise SystemExit("no benchmarks/results-*.json to draw from")
    with open(paths[-1]) as f:
        return os.path.basename(paths[-1]), json.load(f)


def fmt(value, unit):
    if value >= 1000:
        text = f"{value:,.0f}"
    elif value >= 100:
        text = f"{value:.0f}"
    elif value >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit}"


def main():
    results_name, results = newest_results()
    with open(os.path.join(HERE, "peers.json")) as f:
        spec = json.load(f)

    panels, footnotes = [], []
    for metric in spec["metrics"]:
        source = metric["delayq"]
        if "value" in source:
            ours = float(source["value"])
        else:
            ours = float(results["results"][source["result"]][source["field"]]["median"])
        bars = [("delayq", ours)] + [(name, float(v)) for name, v in metric["peers"].items()]
        panels.append((metric, bars))
        if "value" in source:
            footnotes.append(source["source"])
            metric["mark"] = "*" * len(footnotes)

    height = 64
    for _, bars in panels:
        height += PANEL_TOP + len(bars) * (BAR_H + BAR_GAP) + PANEL_GAP
    height += 40 + 16 * sum(1 for m in spec["metrics"] if "value" in m["delayq"])

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        '<text x="16" y="28" font-size="17" font-weight="bold">delayq against its peers</text>',
        f'<text x="16" y="48" fill="#555">each panel on its own linear scale; delayq from {escape(results_name)} '
        "(medians) unless noted; peers as the issue measured them</text>",
    ]
    y = 64
    plot_w = WIDTH - LEFT - RIGHT
    for metric, bars in panels:
        arrow = "lower is better" if metric["better"] == "lower" else "higher is better"
        title = f'{metric["title"]} ({arrow})'
        out.append(f'<text x="16" y="{y + 14}" font-weight="bold">{escape(title)}</text>')
        if "note" in metric:
            out.append(f'<text x="{WIDTH - 16}" y="{y + 14}" text-anchor="end" fill="#777" '
                       f'font-size="10">{escape(metric["note"])}</text>')
        y += PANEL_TOP
        top = max(v for _, v in bars) or 1.0
        for name, value in bars:
            w = max(2.0, plot_w * value / top)
            color = COLORS.get(name, "#444")
            out.append(f'<text x="{LEFT - 8}" y="{y + BAR_H - 4}" text-anchor="end">{escape(name)}</text>')
            out.append(f'<rect x="{LEFT}" y="{y}" width="{w:.1f}" height="{BAR_H}" fill="{color}"/>')
            label = fmt(value, metric["unit"])
            if name == "delayq" and "mark" in metric:
                label += " " + metric["mark"]
            out.append(f'<text x="{LEFT + w + 6:.1f}" y="{y + BAR_H - 4}">{escape(label)}</text>')
            y += BAR_H + BAR_GAP
        y += PANEL_GAP
    for i, note in enumerate(footnotes):
        out.append(f'<text x="16" y="{y + 14}" fill="#555" font-size="10">'
                   f'{"*" * (i + 1)} delayq: {escape(note)}</text>')
        y += 16
    out.append(f'<text x="16" y="{y + 14}" fill="#777" font-size="10">'
               "2 cores (virtualised), Redis 7.0.15 without persistence on the same machine; "
               "regenerate: python3 benchmarks/chart.py</text>")
    out.append("</svg>")

    path = os.path.join(HERE, "chart.svg")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {os.path.relpath(path)} from {results_name} and peers.json")


if __name__ == "__main__":
    main()
