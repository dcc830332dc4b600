#!/usr/bin/env python3
"""Draws Tembo's throughput relative to Redis (AOF always) per test as an SVG
bar chart, from the JSON files bench/server_bench.py writes.

  bench/plot_server.py docs/results/server-redis-benchmark.json \
      docs/results/server-ycsb.json --out docs/results/server.svg

Bars are tembo / redis-aof; the dashed line at 1.0 is parity, the dotted
one at 1.2 the issue's goal for writes. No plotting library needed.
"""

import argparse
import json
from xml.sax.saxutils import escape


def rows(paths):
    out = []
    for p in paths:
        with open(p) as f:
            data = json.load(f)
        for r in data["medians"]:
            if "tembo/redis-aof" in r and not (p.endswith("ycsb.json") and not r["test"].startswith("YCSB")):
                out.append((r["test"], r["tembo/redis-aof"]))
    return out


def svg(data, title):
    bar_h, gap, left, right, top = 18, 6, 150, 60, 50
    width = 720
    plot_w = width - left - right
    vmax = max(1.5, max(v for _, v in data) * 1.1)
    height = top + len(data) * (bar_h + gap) + 40
    x = lambda v: left + plot_w * v / vmax
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
             f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>']
    for i, (name, v) in enumerate(data):
        y = top + i * (bar_h + gap)
        color = "#2a7" if v >= 1.0 else "#d84"
        parts.append(f'<text x="{left - 8}" y="{y + bar_h - 5}" text-anchor="end">{escape(name)}</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{x(v) - left:.1f}" height="{bar_h}" fill="{color}"/>')
        parts.append(f'<text x="{x(v) + 4:.1f}" y="{y + bar_h - 5}">{v:.2f}x</text>')
    bottom = top + len(data) * (bar_h + gap)
    for ref, dash in ((1.0, "6,4"), (1.2, "2,3")):
        parts.append(f'<line x1="{x(ref):.1f}" y1="{top - 6}" x2="{x(ref):.1f}" y2="{bottom}" stroke="#333" stroke-dasharray="{dash}"/>')
        parts.append(f'<text x="{x(ref):.1f}" y="{bottom + 14}" text-anchor="middle">{ref:.1f}x</text>')
    parts.append(f'<text x="{left + plot_w / 2}" y="{bottom + 32}" text-anchor="middle">throughput of tembo serve / redis-server (appendfsync always), same machine and tmpfs</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reports", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="Tembo vs Redis-AOF: redis-benchmark (medians) and YCSB")
    a = ap.parse_args()
    with open(a.out, "w") as f:
        f.write(svg(rows(a.reports), a.title))


if __name__ == "__main__":
    main()
