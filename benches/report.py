#!/usr/bin/env python3
"""Turns a benchmark run into docs/benchmarks.md's tables and two SVG plots.

    cargo bench --bench compare && cargo bench --bench latency && python3 benches/report.py

Reads criterion's estimates (target/criterion/*/*/new/) and target/latency.json; rewrites the
part of docs/benchmarks.md between the RESULTS markers and writes docs/bench-ns-per-id.svg and
docs/bench-latency.svg. Standard library only.
"""

import glob
import json
import math
import os
import platform
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRITERION = os.path.join(ROOT, "target", "criterion")
GROUPS = ["hot_path", "twitter_cap", "two_threads", "batch"]
TITLES = {
    "hot_path": "Hot path, one thread (monoflake on a 21-bit-sequence layout; peers at their own)",
    "twitter_cap": "Twitter layout at its cap (4096 per ms), one thread, sustained 5 s",
    "two_threads": "Two threads sharing one generator (aggregate)",
    "batch": "Batches",
}


def estimates():
    """{group: [(name, ns per element, throughput elements)]} from criterion's output."""
    out = {}
    for bench in glob.glob(os.path.join(CRITERION, "*", "*", "new", "benchmark.json")):
        with open(bench) as f:
            meta = json.load(f)
        with open(os.path.join(os.path.dirname(bench), "estimates.json")) as f:
            est = json.load(f)
        group = meta["group_id"]
        if group not in GROUPS:
            continue
        elements = 1
        tp = meta.get("throughput") or {}
        if "Elements" in tp:
            elements = tp["Elements"]
        ns = est["mean"]["point_estimate"] / elements
        out.setdefault(group, []).append((meta["function_id"], ns, elements))
    for rows in out.values():
        rows.sort(key=lambda r: r[1])
    return out


def fmt_ns(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.2f} ns"


def fmt_rate(ns):
    per_s = 1e9 / ns
    if per_s >= 1e9:
        return f"{per_s / 1e9:.2f} G/s"
    if per_s >= 1e6:
        return f"{per_s / 1e6:.1f} M/s"
    return f"{per_s / 1e3:.1f} k/s"


def tables(est, latency):
    lines = []
    ref = {n: ns for n, ns, _ in est.get("hot_path", [])}
    for group in GROUPS:
        rows = est.get(group)
        if not rows:
            continue
        lines.append(f"### {TITLES[group]}\n")
        lines.append("| generator | per ID | IDs/s | vs monoflake |")
        lines.append("|---|---:|---:|---:|")
        mono = [ns for n, ns, _ in rows if n.startswith("monoflake")]
        best = min(mono) if mono else None
        for name, ns, _ in rows:
            ratio = f"{ns / best:.1f}×" if best else ""
            lines.append(f"| {name} | {fmt_ns(ns)} | {fmt_rate(ns)} | {ratio} |")
        lines.append("")
    if latency:
        for block in latency:
            lines.append(f"### Latency per call, {block['regime']} (ns, timer included)\n")
            lines.append("| generator | p50 | p99 | p99.9 | p99.99 | max |")
            lines.append("|---|---:|---:|---:|---:|---:|")
            for r in block["rows"]:
                lines.append(
                    f"| {r['name']} | {r['p50']} | {r['p99']} | {r['p999']} | {r['p9999']} | {r['max']} |"
                )
            lines.append("")
    return "\n".join(lines), ref


def bar_svg(path, title, rows, unit_fmt, log=True):
    """A horizontal bar chart, log scale, one bar per (name, value)."""
    width, left, bar_h, gap, top = 900, 260, 18, 6, 40
    height = top + len(rows) * (bar_h + gap) + 40
    values = [v for _, v in rows if v > 0]
    lo, hi = min(values), max(values)
    lo_l, hi_l = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if hi_l == lo_l:
        hi_l += 1
    span = width - left - 120

    def x(v):
        return left + span * (math.log10(v) - lo_l) / (hi_l - lo_l)

    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="20" font-size="14" font-weight="bold">{title}</text>',
    ]
    for d in range(lo_l, hi_l + 1):
        gx = x(10**d)
        svg.append(f'<line x1="{gx:.1f}" y1="{top - 6}" x2="{gx:.1f}" y2="{height - 30}" stroke="#ddd"/>')
        svg.append(f'<text x="{gx:.1f}" y="{height - 14}" text-anchor="middle">{unit_fmt(10**d)}</text>')
    for i, (name, v) in enumerate(rows):
        y = top + i * (bar_h + gap)
        color = "#2a7" if name.startswith("monoflake") else ("#888" if "raw" in name or "fetch_add" in name else "#c55")
        svg.append(f'<text x="{left - 8}" y="{y + bar_h - 5}" text-anchor="end">{name}</text>')
        svg.append(f'<rect x="{left}" y="{y}" width="{max(1, x(v) - left):.1f}" height="{bar_h}" fill="{color}"/>')
        svg.append(f'<text x="{x(v) + 6:.1f}" y="{y + bar_h - 5}">{unit_fmt(v)}</text>')
    svg.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(svg) + "\n")


def main():
    est = estimates()
    latency = None
    lpath = os.path.join(ROOT, "target", "latency.json")
    if os.path.exists(lpath):
        with open(lpath) as f:
            latency = [b for b in json.load(f) if b["regime"] != "timer"] or None
            f.seek(0)
            timer = [b for b in json.load(f) if b["regime"] == "timer"]
    text, _ = tables(est, latency)
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            cpu = m.group(1) if m else cpu
    except OSError:
        pass
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    header = f"Machine: {os.cpu_count()} cores, {cpu}, {platform.system()} {platform.release()}; {rustc}.\n"
    if latency and timer:
        t = timer[0]["rows"][0]
        header += f"Timer overhead (two quanta `raw()` reads): p50 {t['p50']} ns, p99 {t['p99']} ns.\n"
    doc = os.path.join(ROOT, "docs", "benchmarks.md")
    with open(doc) as f:
        body = f.read()
    start, end = "<!-- RESULTS START -->", "<!-- RESULTS END -->"
    new = f"{start}\n{header}\n{text}\n{end}"
    body = re.sub(re.escape(start) + ".*" + re.escape(end), lambda _: new, body, flags=re.S)
    with open(doc, "w") as f:
        f.write(body)
    hot = [(n, ns) for n, ns, _ in est.get("hot_path", [])]
    if hot:
        bar_svg(os.path.join(ROOT, "docs", "bench-ns-per-id.svg"),
                "ns per ID, one thread (log scale; lower is better)", hot, fmt_ns)
    if latency:
        cap = next((b for b in latency if b["regime"] == "at the cap"), None)
        if cap:
            rows = [(r["name"], r["p9999"]) for r in sorted(cap["rows"], key=lambda r: r["p9999"])]
            bar_svg(os.path.join(ROOT, "docs", "bench-latency.svg"),
                    "p99.99 latency per call at the Twitter cap (log scale; lower is better)",
                    rows, fmt_ns)
    print(text)


if __name__ == "__main__":
    main()
