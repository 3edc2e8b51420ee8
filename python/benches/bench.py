"""What one ID costs a Python caller: monoflake beside the floor and the published peers.

    python python/benches/bench.py [--rounds 60] [--calls 20000] [--sustained 2000000]
                                   [--sustained-rounds 6] [--json FILE] [--runs N]

One run, one process; every row is timed with `timeit`, the rows interleaved round by round
(each round times every row once, in turn, then rests), so that every row sees the same
machine and the same load. A round's ratio is a row's time over the floor's time *in that
round*; the tables give the lowest time per ID over the rounds and, as the ratio, the median
of the rounds' ratios with their middle half (25th to 75th percentile) beside it: a range
from one run, not the luckiest round. Many short timings rather than a few long ones: on a shared machine a timing that
another process preempts is one round's outlier, not every round's. Each timing includes
`timeit`'s own loop (a few ns per call), the same for every row.

* The peers are timed when installed: `pip install uuid-utils snowflake-id python-ulid`.
* The floor is `time.monotonic_ns()`: a call of a C function that returns a new int.
* **Burst** rows: 20,000 calls per timing on the default (Twitter) layout, each row on a
  generator of its own, within the layout's lead (100 ms of ticks: 409,600 IDs), so what is
  measured is the call.
* **Sustained** rows (in 6 of the rounds, spread over the run): 2,000,000 calls in a row,
  from a generator whose lead has rested: the
  first 409,600 IDs come at the call's speed, the rest at the layout's cap of 4,096 IDs per ms
  (244 ns per ID for any generator with 12 sequence bits per millisecond). A layout with more
  sequence bits lifts the cap; its row shows the call again.
* The batch rows divide by the IDs made. Their floor is `array.tolist()` of 1000 64-bit
  values: what making 1000 Python ints and a list costs, whoever makes them.
* `--runs N` makes N such runs one after the other, each a fresh interpreter, and prints
  one table of them all: the lowest time per ID of any run, and for a ratio the median of
  the runs' medians with the lowest and the highest run's median beside it — how far one
  run's answer moves with the machine's load, which a shared machine changes by the minute.
"""

from __future__ import annotations

import argparse
import array
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import timeit
import uuid

import monoflake

FLOOR = "time.monotonic_ns() (floor)"
LIST_FLOOR = "array.tolist(), 1000 ints (floor)"


def peers() -> dict[str, tuple[str, dict]]:
    """The peers that are installed: name -> (statement, globals), each a generator of its own."""
    rows: dict[str, tuple[str, dict]] = {}
    try:
        import uuid_utils

        rows["uuid_utils.uuid7()"] = ("f()", {"f": uuid_utils.uuid7})
    except ImportError:
        pass
    rows["uuid.uuid4()"] = ("f()", {"f": uuid.uuid4})
    try:
        import ulid

        rows["ulid.ULID() (python-ulid)"] = ("f()", {"f": ulid.ULID})
    except ImportError:
        pass
    try:
        from snowflake import SnowflakeGenerator

        rows["snowflake-id SnowflakeGenerator"] = (
            "n(g)",
            {"n": next, "g": SnowflakeGenerator(1)},
        )
    except ImportError:
        pass
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=60, help="timings per row")
    parser.add_argument(
        "--calls", type=int, default=20_000, help="calls per timing of the burst rows"
    )
    parser.add_argument(
        "--sustained", type=int, default=2_000_000, help="calls per timing of the sustained rows"
    )
    parser.add_argument(
        "--sustained-rounds", type=int, default=6, help="rounds that also time the sustained rows"
    )
    parser.add_argument("--json", help="also write the timings to this file")
    parser.add_argument(
        "--runs", type=int, default=1, help="runs, each in a fresh interpreter, reported together"
    )
    args = parser.parse_args()
    if args.runs > 1:
        return several(args)

    state_dir = tempfile.mkdtemp(prefix="monoflake-bench-")
    os.chmod(state_dir, 0o700)
    monoflake.configure_default(state_dir=state_dir)
    monoflake.next_id()  # claims the default's node before timing
    generators: list[monoflake.Generator] = []

    def leased() -> monoflake.Generator:
        generators.append(monoflake.Generator(state_dir=state_dir))
        return generators[-1]

    # 41 bits of milliseconds, 4 of node and 18 of sequence: 262,144 IDs per ms, a cap far
    # above what one Python thread asks for.
    wide = monoflake.Layout.custom(
        time_bits=41,
        sequence_bits=18,
        node_fields=[("worker", 4)],
        epoch_ms=1_700_000_000_000,
        name="seq18",
    )
    ints = array.array("Q", range(2**62, 2**62 + 1000))
    peer_rows = peers()
    burst = {
        FLOOR: ("f()", {"f": time.monotonic_ns}),
        "monoflake.next_id()": ("f()", {"f": monoflake.next_id}),
        "Generator.next_id()": ("f()", {"f": leased().next_id}),
        # A refusal is a value to act on, not a failure of the run (the keeper thread may be
        # late on a loaded machine): caught, and counted in the time.
        "Generator.try_next_id()": (
            "try:\n    f()\nexcept W:\n    pass",
            {"f": leased().try_next_id, "W": monoflake.WouldBlock},
        ),
        "Generator.unleased(...).next_id()": (
            "f()",
            {"f": monoflake.Generator.unleased("twitter", 1000).next_id},
        ),
        **peer_rows,
    }
    batch = {
        LIST_FLOOR: ("f()", {"f": ints.tolist}),
        "Generator.next_ids(1000)": ("f(1000)", {"f": leased().next_ids}),
        "Generator.next_ids_array(1000)": ("f(1000)", {"f": leased().next_ids_array}),
        "monoflake.next_ids(1000)": ("f(1000)", {"f": monoflake.next_ids}),
    }
    sustained = {
        FLOOR: ("f()", {"f": time.monotonic_ns}),
        "monoflake.next_id()": ("f()", {"f": monoflake.next_id}),
        "Generator.next_id()": ("f()", {"f": leased().next_id}),
        "Generator.unleased(seq18, ...).next_id()": (
            "f()",
            {"f": monoflake.Generator.unleased(wide, 1).next_id},
        ),
        **{
            name: row
            for name, row in peers().items()
            if name in ("uuid_utils.uuid7()", "snowflake-id SnowflakeGenerator")
        },
    }
    tables = {
        "burst": (burst, args.calls, 1),
        "batch": (batch, max(1, args.calls // 1000), 1000),
        "sustained": (sustained, args.sustained, 1),
    }
    timers = {
        table: {name: timeit.Timer(stmt, globals=g) for name, (stmt, g) in rows.items()}
        for table, (rows, _, _) in tables.items()
    }
    times: dict[str, dict[str, list[float]]] = {
        table: {name: [] for name in rows} for table, (rows, _, _) in tables.items()
    }
    every = max(1, args.rounds // max(1, args.sustained_rounds))
    for r in range(args.rounds):
        for table, (_, calls, per_call) in tables.items():
            if table == "sustained" and (r % every or r // every >= args.sustained_rounds):
                continue
            for name, timer in timers[table].items():
                times[table][name].append(timer.timeit(calls) / (calls * per_call) * 1e9)
            if table == "sustained":
                # The sustained rows used up their generators' leads (and the default's):
                # let them rest past the 100 ms lead before the next round's burst.
                time.sleep(0.3)

    for g in generators:
        g.close()
    run = {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load": os.getloadavg(),
        "rounds": args.rounds,
        "sustained_rounds": len(times["sustained"][FLOOR]),
        "calls": args.calls,
        "sustained_calls": args.sustained,
        "times": times,
    }
    report(run)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(run, f, indent=1)
    return 0


def several(args: argparse.Namespace) -> int:
    """`args.runs` runs of this script in turn, each a fresh interpreter writing its timings
    as JSON; then one table of them all (`report_runs`)."""
    import subprocess

    runs = []
    with tempfile.TemporaryDirectory(prefix="monoflake-bench-runs-") as out:
        for i in range(args.runs):
            path = os.path.join(out, f"run-{i}.json")
            command = [
                sys.executable, __file__, "--rounds", str(args.rounds), "--calls",
                str(args.calls), "--sustained", str(args.sustained), "--sustained-rounds",
                str(args.sustained_rounds), "--json", path,
            ]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            with open(path) as f:
                runs.append(json.load(f))
            print(f"run {i + 1} of {args.runs} done", file=sys.stderr)
    report_runs(runs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)
    return 0


def median_ratio(rows: dict[str, list[float]], name: str, base: str) -> float:
    """The median over the rounds of `name`'s time over `base`'s in the same round."""
    return statistics.median(a / b for a, b in zip(rows[name], rows[base]))


def report_runs(runs: list[dict]) -> None:
    """One table of several runs: the lowest ns per ID of all, and each ratio as the median
    of the runs' medians, with the lowest and highest run's median in brackets."""
    loads = ", ".join(f"{run['load'][0]:.1f}" for run in runs)
    first = runs[0]
    print(
        f"{first['python']}, monoflake {monoflake.__version__}, {first['machine']}, "
        f"{first['cpus']} CPUs; {len(runs)} runs of {first['rounds']} interleaved rounds; "
        f"load average (1 min) at the end of each: {loads}"
    )

    def ratio(table: str, name: str, base: str) -> str:
        if name == base:
            return "1"
        medians = sorted(median_ratio(run["times"][table], name, base) for run in runs)
        return f"{statistics.median(medians):.2f}× ({medians[0]:.2f}–{medians[-1]:.2f})"

    for table, floor, header, against in TABLES:
        rows = first["times"][table]
        extra = f" × {against} |" if against in rows else ""
        print()
        print(f"| {header(first)} | ns per ID (min of {len(runs)} runs) | × floor |{extra}")
        print("|---|---:|---:|" + ("---:|" if extra else ""))
        for name in rows:
            low = min(min(run["times"][table][name]) for run in runs)
            line = f"| {name} | {low:.1f} | {ratio(table, name, floor)} |"
            if extra:
                line += f" {ratio(table, name, against)} |"
            print(line)


# Each table: its key, its floor row, its header (from a run), the row its last column
# divides by (when that row was timed).
TABLES = (
    ("burst", FLOOR, lambda run: f"burst: {run['calls']:,} calls per timing", "monoflake.next_id()"),
    ("batch", LIST_FLOOR, lambda run: "batch: 1000 IDs per call", None),
    (
        "sustained",
        FLOOR,
        lambda run: f"sustained: {run['sustained_calls']:,} calls in a row, "
        f"{run['sustained_rounds']} rounds",
        "uuid_utils.uuid7()",
    ),
)


def report(run: dict) -> None:
    """The tables: the lowest ns per ID, and the middle half of the rounds' ratios."""

    def ratio(rows: dict[str, list[float]], name: str, base: str) -> str:
        if name == base:
            return "1"
        ratios = [a / b for a, b in zip(rows[name], rows[base])]
        if len(ratios) < 2:
            return f"{ratios[0]:.2f}×"
        lo, median, hi = statistics.quantiles(ratios, n=4, method="inclusive")
        return f"{median:.2f}× ({lo:.2f}–{hi:.2f})"

    load = ", ".join(f"{x:.1f}" for x in run["load"])
    print(
        f"{run['python']}, monoflake {monoflake.__version__}, {run['machine']}, "
        f"{run['cpus']} CPUs; one run of {run['rounds']} interleaved rounds; load average "
        f"(1, 5, 15 min) at the end: {load}"
    )
    for table, floor, header, against in TABLES:
        rows = run["times"][table]
        extra = f" × {against} |" if against in rows else ""
        print()
        print(f"| {header(run)} | ns per ID (min) | × floor |{extra}")
        print("|---|---:|---:|" + ("---:|" if extra else ""))
        for name, values in rows.items():
            line = f"| {name} | {min(values):.1f} | {ratio(rows, name, floor)} |"
            if extra:
                line += f" {ratio(rows, name, against)} |"
            print(line)


if __name__ == "__main__":
    sys.exit(main())
