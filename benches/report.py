#!/usr/bin/env python3
"""Turns one benchmark run into docs/benchmarks.md's tables and two SVG plots.

    cargo bench --bench compare -- 'hot_path|batch|twitter_cap' && cargo bench --bench threads \
      && cargo bench --bench latency && python3 benches/report.py

Reads criterion's estimates (target/criterion/*/*/new/), target/threads.json,
target/latency.json and target/ratios.json (`cargo bench --bench ratios`: the ratio targets
measured interleaved); rewrites the part of docs/benchmarks.md between the RESULTS markers (the
tables, then the targets computed from the same numbers) and writes docs/bench-ns-per-id.svg
and docs/bench-latency.svg. Standard library only.
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
GROUPS = ["hot_path", "twitter_cap", "batch"]
TITLES = {
    "hot_path": "Hot path, one thread",
    "twitter_cap": "Twitter layout at its cap (4096 per ms), one thread, criterion, 5 s",
    "batch": "Batches, one thread (wide layout for monoflake)",
}
REFERENCES = ("AtomicU64::fetch_add", "quanta raw()")


def is_peer(name):
    return not name.startswith("monoflake") and not name.startswith(REFERENCES)


def layout_of(name):
    """The layout a row ran on, from its name."""
    if name.startswith(REFERENCES):
        return "—"
    if "wide" in name or name.startswith("monoflake next_ids"):
        return "41/1/20" if name.startswith("idgenerator") else "41/1/21"
    if name.startswith(("ulid", "scru128", "uuid", "ferroid thread-local ULID")):
        return "own, 128-bit"
    if name.startswith("sonyflake"):
        return "sonyflake"
    return "twitter (41/10/12)"


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


def load(name):
    path = os.path.join(ROOT, "target", name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def criterion_tables(est):
    lines = []
    for group in GROUPS:
        rows = est.get(group)
        if not rows:
            continue
        peers = [ns for n, ns, _ in rows if is_peer(n)]
        best = min(peers) if peers else None
        lines.append(f"### {TITLES[group]}\n")
        lines.append("Time per ID (criterion's mean). Last column: this row's time over the best "
                     "peer's in this table (below 1× is faster than every peer).\n")
        lines.append("| generator | layout | per ID | IDs/s | × best peer |")
        lines.append("|---|---|---:|---:|---:|")
        for name, ns, _ in rows:
            base = re.sub(r" (x\d+|next_ids\(\d+\))$", "", name)
            ratio = f"{ns / best:.2f}×" if best else ""
            lines.append(f"| {name} | {layout_of(base)} | {fmt_ns(ns)} | {fmt_rate(ns)} | {ratio} |")
        lines.append("")
    return lines


def threads_tables(threads):
    lines = []
    if not threads:
        return lines
    rows = sorted(threads["rows"], key=lambda r: -r["ids_per_s"])
    peers = [r["ids_per_s"] for r in rows if is_peer(r["name"])]
    best = max(peers) if peers else None
    lines.append(f"### Two threads sharing one generator, sustained {threads['window_s']:.0f} s windows\n")
    lines.append("Both threads start on a barrier and call back to back for the whole window. The figure "
                 "is the median of 3 windows; shares are each thread's part of that window; the lowest "
                 "share is over all 3 windows. Last column: this row's rate over the best peer's (above "
                 "1× is faster than every peer).\n")
    lines.append("| generator | layout | IDs/s | ns per ID | thread shares | lowest share | windows (M/s) | × best peer |")
    lines.append("|---|---|---:|---:|---|---:|---|---:|")
    for r in rows:
        shares = " / ".join(f"{s * 100:.1f}%" for s in r["shares"])
        windows = ", ".join(f"{w:.1f}" for w in r["windows_m_per_s"])
        ratio = f"{r['ids_per_s'] / best:.2f}×" if best else ""
        lines.append(f"| {r['name']} | {layout_of(r['name'])} | {r['ids_per_s'] / 1e6:.1f} M/s | "
                     f"{r['ns_per_id']:.2f} ns | {shares} | {r['min_share'] * 100:.1f}% | {windows} | {ratio} |")
    lines.append("")
    lat = [r for r in rows if r.get("latency")]
    if lat:
        lines.append("### Per call under two-thread contention, wide layout, one 1 s window (ns, timer included)\n")
        lines.append("| generator | p50 | p99 | p99.9 | p99.99 | max |")
        lines.append("|---|---:|---:|---:|---:|---:|")
        for r in lat:
            lt = r["latency"]
            lines.append(f"| {r['name']} | {lt['p50']} | {lt['p99']} | {lt['p999']} | {lt['p9999']} | {lt['max']} |")
        lines.append("")
    return lines


def latency_tables(latency):
    lines = []
    for block in latency or []:
        if block["regime"] == "timer":
            continue
        capped = any("of_cap" in r for r in block["rows"])
        lines.append(f"### Latency per call, Twitter layout, {block['regime']} (ns, timer included)\n")
        lines.append("| generator | p50 | p99 | p99.9 | p99.99 | max |" + (" IDs/s | of cap |" if capped else ""))
        lines.append("|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if capped else ""))
        for r in block["rows"]:
            extra = f" {r['ids_per_s'] / 1e6:.3f} M/s | {r['of_cap'] * 100:.2f}% |" if capped else ""
            lines.append(f"| {r['name']} | {r['p50']} | {r['p99']} | {r['p999']} | {r['p9999']} | {r['max']} |{extra}")
        lines.append("")
    return lines


def targets(est, threads, latency):
    """The issue's targets, computed from this run's numbers."""
    hot = {n: ns for n, ns, _ in est.get("hot_path", [])}
    batch = {n: ns for n, ns, _ in est.get("batch", [])}
    two = {r["name"]: r for r in (threads or {}).get("rows", [])}
    rows = []

    def add(what, measured, held):
        rows.append(f"| {what} | {measured} | {held} |")

    f1 = hot.get("ferroid (atomic) wide")
    c1, l1 = hot.get("monoflake coarse wide"), hot.get("monoflake locked wide")
    ref = hot.get("quanta raw() + compare_exchange")
    if f1 and c1:
        add("one thread, coarse ≤ 1.0× ferroid, same layout (criterion group)", f"{fmt_ns(c1)} vs {fmt_ns(f1)}: {c1 / f1:.2f}×",
            "yes" if c1 <= f1 else "**no**")
    if ref and l1:
        add("one thread, locked ≤ 1.2× one `raw()` + one compare-exchange (criterion group)",
            f"{fmt_ns(l1)} vs {fmt_ns(ref)}: {l1 / ref:.2f}×", "yes" if l1 <= 1.2 * ref else "**no**")
    if f1 and l1:
        add("one thread, locked vs ferroid, same layout", f"{l1 / f1:.2f}×", "(reported)")
    f2 = two.get("ferroid (atomic) wide")
    # The locked clock against ferroid on two threads is no target: ferroid's clock is a shared
    # ticker thread (the coarse clock's work), not a counter read per call.
    for name, goal in (("monoflake coarse wide", 1.5), ("monoflake locked wide", None)):
        r = two.get(name)
        clock = name.split()[1]
        if r and f2 and goal:
            x = r["ids_per_s"] / f2["ids_per_s"]
            add(f"two threads, one shared generator, {clock} ≥ {goal}× ferroid, same layout "
                f"(1 s windows)",
                f"{r['ids_per_s'] / 1e6:.1f} vs {f2['ids_per_s'] / 1e6:.1f} M/s: {x:.2f}×",
                "yes" if x >= goal else "**no**")
        if r:
            # The same two threads with nothing shared (a state each): what the two CPUs
            # themselves allow.
            alone = two.get(f"{name}, per-core")
            floor = (f" (with nothing shared, per-core: {alone['min_share'] * 100:.1f}%)"
                     if alone else "")
            add(f"two threads, {clock}: each thread ≥ 40% of the IDs (lowest of 3 windows)",
                f"{r['min_share'] * 100:.1f}%{floor}",
                "yes" if r["min_share"] >= 0.4 else "**no**")
            if r.get("latency"):
                lt = r["latency"]
                add(f"two threads, {clock}: per call under contention",
                    f"p99.99 {lt['p9999']} ns, max {lt['max']} ns", "(reported)")
    # What bounds the two-thread rows, from the same run.
    rmw = hot.get("AtomicU64::fetch_add")
    if rmw and f2:
        add("bound for any generator on one shared state: one uncontended read-modify-write per "
            "ID (`AtomicU64::fetch_add`, one thread)",
            f"{1e3 / rmw:.1f} M/s, against the {1.5 * f2['ids_per_s'] / 1e6:.1f} M/s that 1.5× "
            f"ferroid's two threads would take", "(reported)")
    rr, lw = two.get("quanta raw() + compare_exchange (one try)"), two.get("monoflake locked wide")
    if rr and lw:
        add("two threads, locked vs one `raw()` + one compare-exchange per call (two threads)",
            f"{lw['ids_per_s'] / 1e6:.1f} vs {rr['ids_per_s'] / 1e6:.1f} M/s: "
            f"{lw['ids_per_s'] / rr['ids_per_s']:.2f}×", "(reported)")
    for name in ("monoflake coarse wide, per-core", "monoflake locked wide, per-core"):
        r = two.get(name)
        if r and f2:
            add(f"two threads, {name.split()[1]}, per-core (a state per thread: unique, "
                f"k-sorted) vs ferroid",
                f"{r['ids_per_s'] / 1e6:.1f} vs {f2['ids_per_s'] / 1e6:.1f} M/s: "
                f"{r['ids_per_s'] / f2['ids_per_s']:.2f}×", "(reported)")
    for block in latency or []:
        if not block["regime"].startswith("sustained"):
            continue
        ref = next((r for r in block["rows"] if r["name"].startswith("reference")), None)
        noise = (f" (the spin-to-slot reference in the same regime: p99.99 {ref['p9999']} ns, "
                 f"max {ref['max']} ns)") if ref else ""
        for r in block["rows"]:
            if r["name"].startswith("monoflake per-thread") and ref:
                x = r["p9999"] / ref["p9999"]
                add(f"{block['regime']}, {r['name']}: p99.99 ≤ 1.5× the spin-to-slot reference",
                    f"{r['p9999']} vs {ref['p9999']} ns: {x:.2f}× ({r['of_cap'] * 100:.2f}% of "
                    f"cap, max {r['max']} ns)", "yes" if x <= 1.5 else "**no**")
                continue
            if not r["name"].startswith("monoflake"):
                continue
            ok = r["of_cap"] >= 0.99 and r["p9999"] <= 2000 and r["max"] <= 100_000
            add(f"{block['regime']}, {r['name']}: ≥ 99% of cap, p99.99 ≤ 2 µs, max ≤ 100 µs",
                f"{r['of_cap'] * 100:.2f}%, p99.99 {r['p9999']} ns, max {r['max']} ns{noise}",
                "yes" if ok else "**no**")
    b = batch.get("monoflake next_ids(4096)")
    if b:
        add("batch of 4096 ≥ 1 G IDs/s", fmt_rate(b), "yes" if b <= 1.0 else "**no**")
    if not rows:
        return []
    return ["### The targets, from this run\n", "| target | measured | held? |", "|---|---|---|"] + rows + [""]


def ratio_tables(ratios):
    """The ratio targets measured interleaved (benches/ratios.rs)."""
    if not ratios:
        return []
    out = [f"### The ratio targets, interleaved ({ratios['rounds']} rounds of "
           f"{ratios['slice_ms']:.0f} ms per entrant on one thread, {ratios['two_thread_rounds']} "
           f"rounds of {ratios['window_ms']:.0f} ms on two)\n",
           "Each round runs every entrant in turn and gives one ratio per target; medians and "
           "quartiles over the rounds. This is the figure the targets are judged by: the groups "
           "above run each entrant for seconds, one after another, and this machine's speed "
           "drifts by tens of percent over seconds.\n",
           "| one thread | ns per ID, median | quartiles |", "|---|---:|---|"]
    for r in ratios["one"]:
        out.append(f"| {r['name']} | {r['ns_median']:.2f} | {r['ns_q1']:.2f} – {r['ns_q3']:.2f} |")
    out += ["", "| two threads (one shared generator; one alone; per-thread on two and one) | "
            "M IDs/s, median | quartiles | lowest share |",
            "|---|---:|---|---:|"]
    for r in ratios["two"]:
        out.append(f"| {r['name']} | {r['ids_per_s_median'] / 1e6:.1f} | {r['q1'] / 1e6:.1f} – "
                   f"{r['q3'] / 1e6:.1f} | {r['lowest_share'] * 100:.1f}% |")
    out.append("")
    if "one_state_ids_per_s" in ratios:
        out.append(f"One shared state issues at most what one thread doing nothing but its load and "
                   f"compare-exchange does (its threads take turns on one cache line): "
                   f"{ratios['one_state_ids_per_s'] / 1e6:.1f} M/s in this run, "
                   f"{ratios['one_state_over_ferroid_two']:.2f}× ferroid's two threads.\n")
    return out


def ratio_targets(ratios):
    if not ratios:
        return []
    rows = []

    def add(what, triple, goal, below):
        m, q1, q3 = triple
        held = (m <= goal) if below else (m >= goal)
        rows.append(f"| {what} (interleaved) | {m:.2f}× (quartiles {q1:.2f} – {q3:.2f}) | "
                    f"{'yes' if held else '**no**'} |")

    add("one thread, coarse ≤ 1.0× ferroid", ratios["coarse_over_ferroid"], 1.0, True)
    add("one thread, locked ≤ 1.2× one `raw()` + one compare-exchange",
        ratios["locked_over_raw_cas"], 1.2, True)
    if "slewing_over_raw_cas" in ratios:
        add("one thread, locked ≤ 1.2× one `raw()` + one compare-exchange, while the clock "
            "slews (wall clock 100 ppm slow)", ratios["slewing_over_raw_cas"], 1.2, True)
    add("two threads, coarse ≥ 1.5× ferroid", ratios["two_coarse_over_ferroid"], 1.5, False)
    if "per_thread_handle_over_ferroid_tl" in ratios:
        one = {r["name"]: r for r in ratios["one"]}
        floor = one.get("a plain counter (the call alone)")
        for name, how in (("monoflake per-thread coarse wide, LocalSlot",
                           "a `LocalSlot`, through the harness's call"),
                          ("monoflake per-thread coarse wide, LocalSlot, inlined loop",
                           "a `LocalSlot`, inlined into the loop"),
                          ("monoflake per-thread coarse wide, LocalSlot::ids, inlined loop",
                           "a `LocalSlot`'s iterator, inlined into the loop")):
            h = one.get(name)
            if not h:
                continue
            extra = (f"; the harness's own call: {floor['ns_median']:.2f} ns"
                     if floor and "inlined" not in name else "")
            rows.append(f"| one thread, per-thread coarse ({how}) ≤ 1.5 ns per ID "
                        f"(interleaved) | {h['ns_median']:.2f} ns (quartiles {h['ns_q1']:.2f} – "
                        f"{h['ns_q3']:.2f}){extra} | {'yes' if h['ns_median'] <= 1.5 else '**no**'} |")
        add("one thread, per-thread coarse (a `LocalSlot`) vs ferroid's thread-local ULID",
            ratios["per_thread_handle_over_ferroid_tl"], 1.0, True)
        add("one thread, per-thread coarse (`next_id`) vs ferroid's thread-local ULID",
            ratios["per_thread_next_id_over_ferroid_tl"], 1.0, True)
        if "per_thread_handle_inlined_over_ferroid_tl_inlined" in ratios:
            add("one thread, per-thread coarse (a `LocalSlot`) vs ferroid's thread-local ULID, "
                "both inlined into the loop",
                ratios["per_thread_handle_inlined_over_ferroid_tl_inlined"], 1.0, True)
        if "per_thread_ids_inlined_over_ferroid_tl_inlined" in ratios:
            add("one thread, per-thread coarse (a `LocalSlot`'s iterator) vs ferroid's "
                "thread-local ULID, both inlined into the loop",
                ratios["per_thread_ids_inlined_over_ferroid_tl_inlined"], 1.0, True)
        add("two threads, per-thread coarse (a `LocalSlot` each) ≥ 1.9× one thread",
            ratios["per_thread_handle_two_over_one"], 1.9, False)
        if "per_thread_ids_two_over_one" in ratios:
            add("two threads, per-thread coarse (a `LocalSlot`'s iterator each) ≥ 1.9× one "
                "thread", ratios["per_thread_ids_two_over_one"], 1.9, False)
        add("two threads, per-thread coarse (`next_id`) ≥ 1.9× one thread",
            ratios["per_thread_next_id_two_over_one"], 1.9, False)
        if "private_two_over_one" in ratios:
            m, q1, q3 = ratios["private_two_over_one"]
            rows.append(f"| the machine's own scaling: two threads over one, each advancing a "
                        f"private number (nothing shared), same rounds (interleaved) | {m:.2f}× "
                        f"(quartiles {q1:.2f} – {q3:.2f}) | (reference) |")
            for key, how in (("handle", "a `LocalSlot` each"),
                             ("ids", "a `LocalSlot`'s iterator each"),
                             ("next_id", "`next_id`")):
                m, q1, q3 = ratios[f"per_thread_{key}_scaling_over_private"]
                rows.append(f"| two threads, per-thread coarse ({how}): its scaling over the "
                            f"machine's own, per round (interleaved) | {m:.2f} (quartiles "
                            f"{q1:.2f} – {q3:.2f}) | (reported) |")

    def report(what, triple):
        m, q1, q3 = triple
        rows.append(f"| {what} (interleaved) | {m:.2f}× (quartiles {q1:.2f} – {q3:.2f}) | "
                    f"(reported) |")

    # Two threads taking turns on one state issue no faster than one thread with it to itself.
    for clock in ("coarse", "locked"):
        if f"alone_{clock}_over_ferroid_two" in ratios:
            report(f"two threads, {clock}: the ceiling, one thread alone on the generator over "
                   f"ferroid's two threads", ratios[f"alone_{clock}_over_ferroid_two"])
            report(f"two threads, {clock}: what taking turns keeps, two threads over one alone",
                   ratios[f"two_{clock}_over_alone"])
    return rows


def tables(est, threads, latency, ratios=None):
    lines = criterion_tables(est) + threads_tables(threads) + latency_tables(latency)
    lines += ratio_tables(ratios)
    target_lines = targets(est, threads, latency)
    extra = ratio_targets(ratios)
    if target_lines and extra:
        target_lines = target_lines[:-1] + extra + [""]
    lines += target_lines
    return "\n".join(lines)


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
    threads = load("threads.json")
    latency = load("latency.json")
    ratios = load("ratios.json")
    timer = [b for b in latency or [] if b["regime"] == "timer"]
    text = tables(est, threads, latency, ratios)
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            cpu = m.group(1) if m else cpu
    except OSError:
        pass
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    loadavg = os.getloadavg()
    header = (f"Machine: {os.cpu_count()} cores, {cpu}, {platform.system()} {platform.release()}; "
              f"{rustc}; monoflake at {commit}. Load average when the report was written: "
              f"{loadavg[0]:.2f}, {loadavg[1]:.2f}, {loadavg[2]:.2f} (the machine is shared).\n")
    if timer:
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
    hot = [(n, ns) for n, ns, _ in est.get("hot_path", []) if ns < 1e5]
    if hot:
        bar_svg(os.path.join(ROOT, "docs", "bench-ns-per-id.svg"),
                "ns per ID, one thread (log scale; lower is better)", hot, fmt_ns)
    sustained = next((b for b in latency or [] if b["regime"] == "sustained at the cap, 1 thread"), None)
    if sustained:
        rows = [(r["name"], r["p9999"]) for r in sorted(sustained["rows"], key=lambda r: r["p9999"])]
        bar_svg(os.path.join(ROOT, "docs", "bench-latency.svg"),
                "p99.99 per call, sustained at the Twitter cap, 1 thread (log scale; lower is better)",
                rows, fmt_ns)
    print(text)


if __name__ == "__main__":
    main()
