"""The process-wide default generator (`monoflake.next_id()`): it gives its node up at exit,
claims again after a loss, reads IDs with the configured layout, and never gives up a node
that is not its process's.

Each scenario runs in fresh interpreters (the default is built once per process), with a
private state directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import PRIVATE_SHAPE, private_dir, python_command, run_json

import monoflake

# Each process prints its ID and exits normally (the atexit hooks run).
ONE_SHOT = "import monoflake; print(monoflake.next_id())"
# The default on the tests' private bit shape (conftest), where no other process of the host
# holds a node: which node a claim takes is then this test's alone to say.
PRIVATE = f"import monoflake; monoflake.configure_default({PRIVATE_SHAPE!r})\n"


def one_shot(state_dir: Path, code: str = ONE_SHOT, hang: float = 50) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter whose default state directory is `state_dir`."""
    env = dict(os.environ, MONOFLAKE_STATE_DIR=str(state_dir))
    return subprocess.run(
        python_command(code, hang), env=env, capture_output=True, text=True, timeout=hang + 10
    )


def test_forty_short_processes_in_a_row_all_take_node_0(state_dir):
    """Each gives node 0 up at exit with its final reservation, so the next takes it at once,
    and starts above everything the one before issued."""
    ids = []
    for _ in range(40):
        done = one_shot(state_dir, PRIVATE + ONE_SHOT)
        assert (done.returncode, done.stderr) == (0, "")
        ids.append(int(done.stdout))
    assert [monoflake.decode(i, PRIVATE_SHAPE).node for i in ids] == [0] * 40
    assert ids == sorted(ids) and len(set(ids)) == 40


def test_short_processes_on_the_plain_default_keep_one_node(state_dir):
    """The same with nothing configured (Twitter's layout): whichever node the first takes
    (0, unless another process of this host holds Twitter-shaped nodes), every one after it
    takes the same."""
    ids = []
    for _ in range(10):
        done = one_shot(state_dir)
        assert (done.returncode, done.stderr) == (0, "")
        ids.append(int(done.stdout))
    nodes = [monoflake.decode(i).node for i in ids]
    assert nodes == [nodes[0]] * 10
    assert ids == sorted(ids)


def test_a_process_that_never_issued_gives_nothing_up(state_dir):
    # Its exit hook finds no default: nothing claimed, nothing written.
    done = one_shot(state_dir, "import monoflake")
    assert (done.returncode, done.stderr) == (0, "")
    assert list(state_dir.iterdir()) == []


FORK_CHILD_EXITS_NORMALLY = r"""
import faulthandler, json, os, sys
import monoflake
dir, shape = sys.argv[1], sys.argv[2]
monoflake.configure_default(shape)
parent_node = monoflake.decode(monoflake.next_id()).node
r, w = os.pipe()
# A forked child that exits normally waits forever at its exit for faulthandler's watchdog
# thread, which did not survive the fork (CPython's own): disarmed across the fork.
faulthandler.cancel_dump_traceback_later()
pid = os.fork()
faulthandler.dump_traceback_later(60, exit=True)
if pid == 0:
    # The child issues on a node of its own (or, with ISSUE=0, not at all), then ends as any
    # script ends: sys.exit runs the atexit hooks, inherited from the parent.
    if os.environ.get("ISSUE") == "1":
        os.write(w, str(monoflake.decode(monoflake.next_id()).node).encode())
    os.close(w)
    sys.exit(0)
os.close(w)
child_node = os.read(r, 100).decode()
_, status = os.waitpid(pid, 0)
# The parent's node is still held by the parent (no one else can claim it), and it issues on.
with monoflake.Generator(shape, state_dir=dir) as g:
    fresh_node = g.node
after = [monoflake.decode(monoflake.next_id()).node for _ in range(3)]
print(json.dumps({"status": status, "parent": parent_node, "child": child_node,
                  "fresh": fresh_node, "after": after}))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("issue", ["0", "1"])
def test_a_forked_child_that_exits_normally_never_gives_the_parents_node_up(state_dir, issue):
    env_code = f"import os; os.environ['ISSUE'] = {issue!r}\n"
    out = run_json(
        env_code
        + f"import sys; sys.argv = ['x', {str(state_dir)!r}, {PRIVATE_SHAPE!r}]\n"
        + FORK_CHILD_EXITS_NORMALLY,
        state_dir,
    )
    assert out["status"] == 0
    assert out["parent"] == 0 and out["after"] == [0, 0, 0]
    if issue == "1":
        # The child claimed node 1 and gave it up at its exit: a fresh claim takes it back.
        assert out["child"] == "1"
    else:
        assert out["child"] == ""
    assert out["fresh"] == 1


POOL_THEN_CLAIM = r"""
import json, multiprocessing, sys
import monoflake

def work(_):
    return monoflake.decode(monoflake.next_id()).node

if __name__ == "__main__":
    monoflake.configure_default(sys.argv[2])
    parent = monoflake.decode(monoflake.next_id()).node
    ctx = multiprocessing.get_context("fork")
    # maxtasksperchild: workers that end (by os._exit) and are replaced while the pool runs.
    with ctx.Pool(2, maxtasksperchild=2) as pool:
        workers = sorted(set(pool.map(work, range(8), chunksize=1)))
    with monoflake.Generator(sys.argv[2], state_dir=sys.argv[1]) as g:
        fresh = g.node
    print(json.dumps({"parent": parent, "workers": workers, "fresh": fresh,
                      "after": monoflake.decode(monoflake.next_id()).node}))
"""


def test_multiprocessing_fork_workers_never_give_the_parents_node_up(state_dir):
    argv = f"import sys; sys.argv = ['x', {str(state_dir)!r}, {PRIVATE_SHAPE!r}]\n"
    out = run_json(argv + POOL_THEN_CLAIM, state_dir)
    assert out["parent"] == out["after"] == 0
    assert 0 not in out["workers"]
    assert out["fresh"] != 0


# Two IDs a second, no lead: threads on it spend their time waiting at the lead limit.
SLOW = monoflake.Layout("time=31,worker=4,sequence=1,epoch=2024-01-01,tick=1s")

EXIT_WHILE_THREADS_ISSUE = r"""
import os, threading, monoflake
if os.environ["CASE"] == "slow":
    monoflake.configure_default(os.environ["SLOW"], max_lead=0)
else:
    monoflake.configure_default(os.environ["PRIVATE_SHAPE"])
node = monoflake.decode(monoflake.next_id()).node  # with the configured layout
started = threading.Barrier(5)
def issue():
    started.wait()
    try:
        while True:
            monoflake.next_id()
            monoflake.next_ids(2)
    except monoflake.LeaseLost:
        pass  # the default was given up at exit
for _ in range(4):
    threading.Thread(target=issue, daemon=True).start()
started.wait()
print("exiting", node, flush=True)
"""


@pytest.mark.parametrize("case", ["fast", "slow"])
def test_exit_while_daemon_threads_issue_neither_hangs_nor_panics(state_dir, case):
    """The exit hook closes the default while daemon threads are on the common path or
    waiting at the lead limit: they let go within a slice and get `LeaseLost`; the exit does
    not wait on the GIL or a lock, and the node is given up."""
    env = dict(
        os.environ,
        MONOFLAKE_STATE_DIR=str(state_dir),
        CASE=case,
        SLOW=SLOW.spec,
        PRIVATE_SHAPE=PRIVATE_SHAPE,
    )
    done = subprocess.run(
        python_command(EXIT_WHILE_THREADS_ISSUE, 30), env=env, capture_output=True, text=True,
        timeout=40,
    )
    assert done.returncode == 0 and done.stdout.startswith("exiting "), done.stderr
    assert done.stderr == ""
    if case == "fast":
        # Given up at the exit: the next process takes the node at once. (On the slow
        # layout the final reservation is the end of the current second, more than its
        # max_lead of 0 ahead, so the next claim may rather take a node that costs no wait.)
        after = one_shot(state_dir, PRIVATE + ONE_SHOT)
        assert after.returncode == 0, after.stderr
        node = int(done.stdout.split()[1])
        assert monoflake.decode(int(after.stdout), PRIVATE_SHAPE).node == node == 0


def test_exit_while_another_thread_is_claiming_neither_hangs_nor_panics(state_dir):
    # The first claim in an empty directory waits 250 ms (a node with no record); the main
    # thread exits meanwhile, while that thread is out of the GIL, claiming.
    code = r"""
import threading, monoflake
threading.Thread(target=monoflake.next_id, daemon=True).start()
print("exiting", flush=True)
"""
    done = one_shot(state_dir, code, hang=30)
    assert (done.returncode, done.stdout, done.stderr) == (0, "exiting\n", "")


RECOVER = r"""
import json, os, shutil, sys, time, warnings
import monoflake
dir, other, shape = sys.argv[1], sys.argv[2] == "other", sys.argv[3]
monoflake.configure_default(shape, state_dir=dir)
before = [monoflake.next_id() for _ in range(1000)] + monoflake.next_ids(5000)
node_before = monoflake.decode(before[-1]).node
# An operator's rm -rf: the lock file and the reservation are gone.
shutil.rmtree(dir)
os.mkdir(dir, 0o700)
held = None
if other:
    # Another holder takes node 0 in the new directory as soon as the lost one lets it go.
    deadline = time.monotonic() + 60
    while held is None:
        try:
            held = monoflake.Generator(shape, node=node_before, state_dir=dir)
        except monoflake.NodeUnavailable:
            assert time.monotonic() < deadline, "node 0 was never let go"
            time.sleep(0.05)
refusals = []
after = []
deadline = time.monotonic() + 60
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    # Until the loss is found, the lost generator may go on issuing within its fence (IDs
    # that count as before); the call that finds it claims again, says so and issues anew.
    while not after:
        assert time.monotonic() < deadline, refusals[-5:]
        k = len(said)
        try:
            id = monoflake.next_id()
        except monoflake.Error as e:
            refusals.append(type(e).__name__)
            time.sleep(0.01)
            continue
        (after if len(said) > k else before).append(id)
        time.sleep(0.001)
    after += [monoflake.next_id() for _ in range(1000)] + monoflake.next_ids(5000)
print(json.dumps({
    "before": before, "after": after, "node_before": node_before,
    "node_after": monoflake.decode(after[-1]).node,
    "held": held.node if held else None,
    "refusals": sorted(set(refusals)),
    "warnings": [[w.category.__name__, str(w.message)] for w in said],
}))
"""


@pytest.mark.parametrize("other", ["same", "other"])
def test_the_default_claims_again_after_its_state_directory_is_removed(state_dir, other):
    out = run_json(
        f"import sys; sys.argv = ['x', {str(state_dir)!r}, {other!r}, {PRIVATE_SHAPE!r}]\n"
        + RECOVER,
        private_dir(),
    )
    before, after = out["before"], out["after"]
    assert len(set(before)) == len(before) >= 6000 and len(set(after)) == len(after) == 6001
    # Every ID after the recovery is above every one before it, whichever node it holds.
    assert min(after) > max(before)
    assert after == sorted(after) and before == sorted(before)
    assert out["node_before"] == 0
    if other == "other":
        assert out["held"] == 0 and out["node_after"] == 1
    else:
        assert out["held"] is None and out["node_after"] == 0
    # The refusals before the loss was found, if any, are the lost lease's own.
    assert set(out["refusals"]) <= {"LeaseLost", "StoreError"}
    # Said once, with what happened.
    [(category, message)] = out["warnings"]
    assert category == "LeaseWarning"
    assert message.startswith("monoflake: the default generator lost its lease on node 0 (")
    assert message.endswith(f"; it released it and claimed node {out['node_after']}")


def test_decode_and_opaque_use_the_configured_default_layout(state_dir):
    key = "00112233445566778899aabbccddeeff"
    out = run_json(
        f"""
import json, time, monoflake
key = {key!r}
twitter_id = monoflake.Layout("twitter").compose_at(1_700_000_000_000, 5, 1)
before = [monoflake.decode(twitter_id).layout.name, monoflake.Opaque(key).bits]
monoflake.configure_default(layout="discord")
id = monoflake.next_id()
p = monoflake.decode(id)
print(json.dumps({{
    "before": before,
    "layout": p.layout.name,
    "age_ms": time.time() * 1000 - p.unix_ms,
    "same": p == monoflake.decode(id, "discord"),
    # Discord's IDs use all 64 bits, Twitter's 63: the space an Opaque permutes says whose.
    "opaque_bits": monoflake.Opaque(key).bits,
    "opaque": monoflake.Opaque(key).encrypt(id) == monoflake.Opaque(key, "discord").encrypt(id),
}}))
""",
        state_dir,
    )
    assert out["before"] == ["twitter", 63]
    assert out["layout"] == "discord" and out["same"]
    # Read as Discord's ID (from 2015), not Twitter's (from 2010): the time is now, not years
    # before it.
    assert -60_000 < out["age_ms"] < 60_000
    assert out["opaque_bits"] == 64 and out["opaque"]


def _nobody_can_run(python: str) -> bool:
    probe = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", "0"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


FALLBACK = r"""
import json, warnings
import monoflake
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    a = monoflake.next_id()
    with monoflake.Generator() as g:  # the default directory again: not said twice
        b = g.next_id()
    c = monoflake.next_id()
print(json.dumps({
    "ids": [a, b, c],
    "warnings": [[w.category.__name__, str(w.message), w.filename] for w in said],
}))
"""


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to become nobody")
def test_the_fallback_to_the_users_own_state_directory_is_said_once():
    """As nobody, who cannot use /var/lib/monoflake: the default state directory is
    ~/.local/state/monoflake, and a LeaseWarning says so once per process."""
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv")
    # An interpreter nobody can run (a venv's may point into root's home), and the package
    # copied where nobody can read it.
    python = next(
        (p for p in (sys.executable, "/usr/bin/python3") if Path(p).exists() and _nobody_can_run(p)),
        None,
    )
    if python is None:
        pytest.skip("no Python interpreter the user nobody can run")
    # Not under pytest's tmp_path, whose parents are root's own (mode 0700).
    root = Path(tempfile.mkdtemp(prefix="monoflake-nobody-"))
    try:
        home, lib = root / "home", root / "lib"
        home.mkdir()
        shutil.copytree(Path(monoflake.__file__).parent, lib / "monoflake")
        for p in [root, lib, *lib.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        os.chown(home, 65534, 65534)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": str(lib)}
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", FALLBACK],
            env=env, cwd=str(home), capture_output=True, text=True, timeout=60,
        )
        own = home / ".local" / "state" / "monoflake"
        made = own.is_dir() and own.stat().st_uid == 65534
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    out = __import__("json").loads(done.stdout.strip().splitlines()[-1])
    [(category, message, filename)] = out["warnings"]
    assert category == "LeaseWarning"
    assert message.startswith(f"monoflake: state directory {own} (cannot ")
    assert "share /var/lib/monoflake with a group" in message
    assert filename == "<string>"  # the caller's line, not the extension's
    assert made
    a, b, c = out["ids"]
    assert len({a, b, c}) == 3
    assert monoflake.decode(a).node == monoflake.decode(c).node != monoflake.decode(b).node


RAW_FORK = r"""
import ctypes, json, os, sys
import monoflake
monoflake.configure_default(sys.argv[1])
parent = [monoflake.next_id() for _ in range(1000)]
r, w = os.pipe()
# fork(2) itself, past os.fork: Python's fork hooks do not run, so the package does not know
# it is in a child; the library does, and the default claims anew when it says so.
pid = ctypes.CDLL(None, use_errno=True).syscall(57)  # SYS_fork on x86-64
if pid == 0:
    try:
        child = [monoflake.next_id() for _ in range(1000)] + monoflake.next_ids(1000)
        os.write(w, json.dumps(child).encode())
    finally:
        os._exit(0)
os.close(w)
data = b""
while chunk := os.read(r, 1 << 16):
    data += chunk
_, status = os.waitpid(pid, 0)
after = [monoflake.next_id() for _ in range(1000)]
print(json.dumps({"status": status, "parent": parent + after, "child": json.loads(data)}))
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="SYS_fork is 57 on x86-64 only")
def test_a_child_of_a_raw_fork_claims_its_own_node(state_dir):
    out = run_json(f"import sys; sys.argv = ['x', {PRIVATE_SHAPE!r}]\n" + RAW_FORK, state_dir)
    assert out["status"] == 0
    parent, child = out["parent"], out["child"]
    assert len(child) == 2000 and set(parent).isdisjoint(child)
    assert {monoflake.decode(i, PRIVATE_SHAPE).node for i in parent} == {0}
    assert {monoflake.decode(i, PRIVATE_SHAPE).node for i in child} == {1}


CAVEAT = r"""
import sys, warnings
import monoflake
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as seen:
    g = monoflake.Generator(state_dir=sys.argv[1])
    g.next_id()
    g2 = monoflake.Generator(state_dir=sys.argv[1])
    g2.next_id()
    g.close(); g2.close()
for w in seen:
    if issubclass(w.category, monoflake.LeaseWarning):
        print(str(w.message))
"""


def test_a_network_namespace_of_its_own_is_said_once(tmp_path):
    """In a network namespace with nothing but loopback (unshare --net, root's), out of the
    reach of the host-wide claim: one LeaseWarning says so, with what to do (issue 54)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare --net")
    env = {k: v for k, v in os.environ.items() if k != "MONOFLAKE_TEST_HOST_SCOPE"}
    out = subprocess.run(
        ["unshare", "--net", sys.executable, "-c", CAVEAT, str(tmp_path / "state")],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    said = [line for line in out.stdout.splitlines() if "network namespace" in line]
    assert len(said) == 1, out.stdout
    assert said[0].startswith("monoflake: this process is in a network namespace of its own")
    assert "Give this service a node range of its own" in said[0]
