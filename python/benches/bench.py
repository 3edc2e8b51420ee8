"""What one ID costs a Python caller: monoflake beside the floor and the published peers.

    python python/benches/bench.py [--runs 3] [--rounds 15] [--calls 100000] [--json FILE]

Every row is timed in this one process with `timeit`, the rows interleaved round by round
(each round times every row once, in turn), and the minimum over the rounds is reported:
the run least disturbed by other work on the machine. Each timing includes `timeit`'s own
loop (a few ns per call), the same for every row.

With `--runs N` the whole measurement runs N times, each in a fresh process, and each cell
shows the range over the runs (lowest–highest).

* The floor is `time.monotonic_ns()`: a call of a C function that returns a new int.
* monoflake's rows run on the default (Twitter) layout, each on a generator of its own. A
  timing issues 100,000 IDs in a few milliseconds: a burst within the layout's lead (100 ms
  of ticks, 409,600 IDs), so what is measured is the call. Sustained above 4,096 IDs per ms
  the layout's cap binds instead (244 ns per ID): a layout with more sequence bits lifts it.
* The batch rows divide by the IDs made. Their floor is `array.tolist()` of 1000 64-bit
  values: what making 1000 Python ints and a list costs, whoever makes them.
"""

from __future__ import annotations

import argparse
import array
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import timeit
import uuid

import monoflake


def peers() -> dict[str, tuple[str, dict]]:
    """The peers that are installed: name -> (statement, globals)."""
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
    parser.add_argument("--rounds", type=int, default=15, help="timings per row (min kept)")
    parser.add_argument(
        "--calls", type=int, default=100_000, help="calls per timing of the one-ID rows"
    )
    parser.add_argument("--runs", type=int, default=1, help="fresh processes, ranges shown")
    parser.add_argument("--json", help="also write the results to this file")
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

    ints = array.array("Q", range(2**62, 2**62 + 1000))
    one = {
        "time.monotonic_ns() (floor)": ("f()", {"f": time.monotonic_ns}),
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
        **peers(),
    }
    batch = {
        "array.tolist(), 1000 ints (floor)": ("f()", {"f": ints.tolist}),
        "Generator.next_ids(1000)": ("f(1000)", {"f": leased().next_ids}),
        "Generator.next_ids_array(1000)": ("f(1000)", {"f": leased().next_ids_array}),
        "monoflake.next_ids(1000)": ("f(1000)", {"f": monoflake.next_ids}),
    }
    timers = {
        name: (timeit.Timer(stmt, globals=g), args.calls, 1)
        for name, (stmt, g) in one.items()
    }
    batch_calls = max(1, args.calls // 1000)
    timers.update(
        {
            name: (timeit.Timer(stmt, globals=g), batch_calls, 1000)
            for name, (stmt, g) in batch.items()
        }
    )
    best = {name: float("inf") for name in timers}
    for _ in range(args.rounds):
        for name, (timer, calls, per_call) in timers.items():
            best[name] = min(best[name], timer.timeit(calls) / (calls * per_call) * 1e9)

    for g in generators:
        g.close()
    runs = [{"best": best, "one": list(one), "batch": list(batch), "load": os.getloadavg()[0]}]
    report(runs, args.rounds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs[0], f, indent=1)
    return 0


def several(args: argparse.Namespace) -> int:
    """Runs the measurement `args.runs` times, each in a fresh process, and reports ranges."""
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            out = os.path.join(tmp, f"run-{i}.json")
            subprocess.run(
                [sys.executable, __file__, "--rounds", str(args.rounds), "--calls",
                 str(args.calls), "--json", out],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            with open(out) as f:
                runs.append(json.load(f))
    report(runs, args.rounds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)
    return 0


def report(runs: list[dict], rounds: int) -> None:
    """The tables: each cell the range over the runs."""

    def cell(values: list[float], digits: int, suffix: str = "") -> str:
        lo, hi = min(values), max(values)
        if f"{lo:.{digits}f}" == f"{hi:.{digits}f}":
            return f"{lo:.{digits}f}{suffix}"
        return f"{lo:.{digits}f}–{hi:.{digits}f}{suffix}"

    loads = ", ".join(f"{r['load']:.1f}" for r in runs)
    print(
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"monoflake {monoflake.__version__}, {platform.machine()}; {len(runs)} run(s), "
        f"each the min of {rounds} rounds; load average at the end of each: {loads}"
    )
    for table, floor_name, header in (
        ("one", "time.monotonic_ns() (floor)", "| call | ns per ID | × floor |"),
        ("batch", "array.tolist(), 1000 ints (floor)", "| batch | ns per ID | × list floor |"),
    ):
        print()
        print(header)
        print("|---|---:|---:|")
        for name in runs[0][table]:
            ns = [r["best"][name] for r in runs]
            ratio = [r["best"][name] / r["best"][floor_name] for r in runs]
            print(f"| {name} | {cell(ns, 1)} | {cell(ratio, 2, '×')} |")


if __name__ == "__main__":
    sys.exit(main())
