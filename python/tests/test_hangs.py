"""No hangs: a waiting call never stops other threads, a fork never leaves the child stuck on
a lock, Ctrl-C ends a wait, and a batch that can never fit is refused at once.

Each scenario runs in a child interpreter with a timeout, and the child arms
`faulthandler.dump_traceback_later` (conftest's `python_command`): a regression fails (with
the stuck threads' tracebacks) instead of hanging the suite. The timeouts are liveness
bounds, not timings.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from conftest import python_command, run_json

import monoflake

# A child that hangs dumps its threads and exits 1 after this many seconds.
HANG = 20

PRELUDE = r"""
import json, os, sys, threading, time, traceback
import monoflake

# Two IDs an hour, no lead: once the hour's two are issued, next_id() waits for the next
# hour (at most max_wait, two minutes).
SLOW = monoflake.Layout.custom(
    time_bits=30, sequence_bits=1, node_fields=[("worker", 4)],
    epoch_ms=1_700_000_000_000, tick_ms=3_600_000,
)

def slow_generator():
    g = monoflake.Generator.unleased(SLOW, 1, max_lead=0, max_wait=120)
    while True:
        try:
            g.try_next_id()
        except monoflake.WouldBlock:
            return g

def outcome(call):
    try:
        return call()
    except monoflake.Error as e:
        return type(e).__name__

def waiter(g, results, call=None):
    t = threading.Thread(
        target=lambda: results.append(outcome(call or g.next_id)), daemon=True
    )
    t.start()
    time.sleep(0.3)  # into its wait
    return t

def in_fork(child):
    # Runs child() in a forked child; returns (its exit status, what it returned).
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # never returns to the parent's code
        try:
            os.write(w, json.dumps(child()).encode())
            os._exit(0)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(r, "rb") as f:
        return status, json.loads(f.read() or b"null")
"""


def run_child(code: str) -> dict:
    """`code` after PRELUDE in a child interpreter that dumps its threads and exits after
    HANG seconds; its last line, as JSON."""
    return run_json(PRELUDE + code, timeout=HANG + 40, hang=HANG)


def test_getters_do_not_hang_while_close_waits_for_a_waiting_call():
    # One thread waits at the lead limit, another closes, the main thread reads `closed`,
    # `repr()` and `max_wait`: none of it may block the waiting thread's return.
    out = run_child(
        r"""
g = slow_generator()
results = []
t1 = waiter(g, results)
t2 = threading.Thread(target=g.close)
t2.start()
time.sleep(0.3)
reads = [(g.closed, repr(g), g.max_wait, g.node) for _ in range(1000)]
t2.join()
t1.join()
print(json.dumps({"waiter": results, "closed": g.closed, "repr": repr(g),
                  "after": outcome(g.next_id)}))
"""
    )
    assert out["waiter"] == ["LeaseLost"]
    assert out["closed"] is True
    assert out["repr"].endswith(", closed)")
    assert out["after"] == "LeaseLost"


def test_close_on_another_thread_ends_a_wait_and_stats_do_not_block():
    out = run_child(
        r"""
g = slow_generator()
results = []
t1 = waiter(g, results, call=lambda: g.next_ids(2))
stats_during = g.stats().issued
g.close()
t1.join()
print(json.dumps({"waiter": results, "issued": stats_during}))
"""
    )
    assert out == {"waiter": ["LeaseLost"], "issued": 2}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_child_of_a_fork_during_a_wait_closes_without_hanging():
    out = run_child(
        r"""
g = slow_generator()
results = []
t1 = waiter(g, results)
def child():
    out = {"next_id": outcome(g.next_id), "check": outcome(g.check)}
    g.close()
    return {**out, "closed": g.closed, "after_close": outcome(g.next_id)}
status, child = in_fork(child)
g.close()
t1.join()
print(json.dumps({"status": status, "child": child, "waiter": results}))
"""
    )
    assert out["status"] == 0
    assert out["child"] == {
        "next_id": "Forked",
        "check": "Forked",
        "closed": True,
        "after_close": "Forked",
    }
    assert out["waiter"] == ["LeaseLost"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_child_of_a_fork_during_close_raises_forked():
    out = run_child(
        r"""
g = slow_generator()
results = []
t1 = waiter(g, results)
closer = threading.Thread(target=g.close)
closer.start()
def child():
    out = {"next_id": outcome(g.next_id), "ids": outcome(lambda: g.next_ids(3)),
           "closed": type(g.closed).__name__, "repr": repr(g).startswith("Generator(")}
    g.close()
    return out
status, child = in_fork(child)
closer.join()
t1.join()
print(json.dumps({"status": status, "child": child, "closed": g.closed}))
"""
    )
    assert out["status"] == 0
    assert out["child"] == {"next_id": "Forked", "ids": "Forked", "closed": "bool", "repr": True}
    assert out["closed"] is True


def test_close_in_a_signal_handler_during_a_wait_on_the_same_thread():
    # A graceful-shutdown handler closes the generator the interrupted thread is waiting on:
    # the wait ends with LeaseLost, the close does not wait for its own caller.
    out = run_child(
        r"""
import signal
g = slow_generator()
signal.signal(signal.SIGALRM, lambda *_: g.close())
signal.setitimer(signal.ITIMER_REAL, 0.3)
print(json.dumps({"next_id": outcome(g.next_id), "closed": g.closed,
                  "ids": outcome(lambda: g.next_ids(2))}))
"""
    )
    assert out == {"next_id": "LeaseLost", "closed": True, "ids": "LeaseLost"}


def test_close_while_eight_threads_issue_ends_each_with_lease_lost():
    # Threads on the common path (and some at the lead limit) while another closes: each
    # ends with LeaseLost, none hangs, no ID twice.
    out = run_child(
        r"""
g = monoflake.Generator(state_dir=os.environ["MONOFLAKE_STATE_DIR"])
ids, ends, started = [], [], threading.Barrier(9)
def issue():
    mine = []
    started.wait()
    try:
        while True:
            mine.append(g.next_id())
            if len(mine) % 1000 == 0:
                mine.extend(g.next_ids(1000))
    except monoflake.Error as e:
        ends.append(type(e).__name__)
    ids.extend(mine)
threads = [threading.Thread(target=issue) for _ in range(8)]
for t in threads:
    t.start()
started.wait()
time.sleep(0.2)
g.close()
for t in threads:
    t.join()
print(json.dumps({"ends": ends, "issued": len(ids), "unique": len(set(ids)),
                  "closed": g.closed}))
"""
    )
    assert out["ends"] == ["LeaseLost"] * 8
    assert out["issued"] == out["unique"] > 0
    assert out["closed"] is True


WAIT_THEN_SIGINT = r"""
# Python turns SIGINT into KeyboardInterrupt only when it was not ignored at start: a test run
# started in the background by a non-interactive shell (`cmd &`) inherits it ignored.
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
g = slow_generator()
print("waiting", flush=True)
g.{call}
print("returned", flush=True)
"""


@pytest.mark.parametrize("call", ["next_id()", "next_ids(2)", "next_ids_array(2)"])
def test_sigint_ends_a_wait_with_keyboard_interrupt(call):
    child = subprocess.Popen(
        python_command(PRELUDE + WAIT_THEN_SIGINT.replace("{call}", call), HANG),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline() == "waiting\n"
        time.sleep(0.3)  # into the wait
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=10)
    finally:
        child.kill()
        child.wait()
    assert child.returncode != 0
    assert "KeyboardInterrupt" in stderr
    assert "returned" not in stderr


def test_a_batch_that_can_never_fit_is_refused_at_once():
    g = monoflake.Generator.unleased("twitter", 1, max_wait=120)
    before = g.next_id()
    # 101 ticks of 4096 IDs end within the default 100 ms lead: never more at once.
    for n in (413_697, 500_000, 10**12, 2**61, 2**63 - 1):
        for call in (g.try_next_ids, g.next_ids, g.next_ids_array):
            with pytest.raises(monoflake.BatchTooLarge) as e:
                call(n)
            assert (e.value.requested, e.value.limit, e.value.kind) == (
                n,
                413_696,
                "BatchTooLarge",
            )
            assert isinstance(e.value, ValueError)
    # Nothing damaged: the generator goes on, after the ID before.
    assert g.next_id() > before
    assert len(g.next_ids(100_000)) == 100_000
