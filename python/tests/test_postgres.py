"""The PostgreSQL backend (`backend="postgres"`), against the server `.ci/run` starts
($MONOFLAKE_TEST_PG, the variable the Rust tests read too). Skipped only when that variable is
absent; with it set, a build without the `postgres` feature fails here.

Each test keeps its rows in a table of its own, so runs and the Rust tests sharing the server
never see each other's nodes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import monoflake

URL = os.environ.get("MONOFLAKE_TEST_PG")
pytestmark = pytest.mark.skipif(URL is None, reason="no PostgreSQL: set MONOFLAKE_TEST_PG")


@pytest.fixture
def table() -> str:
    return f"pytest_{uuid.uuid4().hex}"


def pg(table: str, **settings) -> monoflake.Generator:
    return monoflake.Generator(backend="postgres", pg_url=URL, pg_table=table, **settings)


def test_nodes_are_claimed_in_postgres_and_never_shared(table):
    with pg(table, lease_ttl=2) as a, pg(table, node=5) as b:
        assert (a.leased, a.node, b.node) == (True, 0, 5)
        assert set(a.next_ids(5000)).isdisjoint(b.next_ids(5000))
        with pytest.raises(monoflake.NodeUnavailable) as e:
            pg(table, node=5)
        assert (e.value.kind, e.value.node) == ("NodeHeld", 5)
        # "auto" passes over both held nodes.
        with pg(table) as c:
            assert c.node == 1


def test_a_node_given_back_is_claimed_again_above_everything_issued(table):
    with pg(table, node=3) as g:
        last = g.next_ids(10_000)[-1]
    assert g.closed
    with pytest.raises(monoflake.LeaseLost):
        g.next_id()
    with pg(table, node=3) as again:
        assert again.next_id() > last


def test_the_connection_string_can_come_from_the_environment(table, monkeypatch):
    monkeypatch.setenv("MONOFLAKE_PG_URL", URL)
    with monoflake.Generator(backend="postgres", pg_table=table) as g:
        assert g.next_id() > 0
    monkeypatch.delenv("MONOFLAKE_PG_URL")
    with pytest.raises(monoflake.InvalidConfig) as e:
        monoflake.Generator(backend="postgres", pg_table=table)
    assert (e.value.setting, e.value.value) == ("pg_url", "missing")


def test_settings_are_checked_before_connecting(table, state_dir):
    for settings, setting in [
        (dict(backend="postgres", pg_url=URL, lease_ttl=0.5), "lease_ttl"),
        (dict(backend="postgres", pg_url=URL, lease_ttl=3601), "lease_ttl"),
        (dict(backend="postgres", pg_url=URL, pg_table="nodes; drop table x"), "pg_table"),
        (dict(backend="postgres", pg_url=URL, etcd_prefix="/x"), "etcd_prefix"),
        (dict(backend="postgres", pg_url=URL, state_dir=state_dir), "state_dir"),
        (dict(backend="file", state_dir=state_dir, pg_url=URL), "pg_url"),
        (dict(backend="file", state_dir=state_dir, pg_table=table), "pg_table"),
        (dict(backend="etcd", pg_url=URL), "pg_url"),
    ]:
        with pytest.raises(monoflake.InvalidConfig) as e:
            monoflake.Generator(**settings)
        assert e.value.setting == setting, settings
        assert URL not in str(e.value)
    # configure_default checks the same list.
    with pytest.raises(monoflake.InvalidConfig) as e:
        monoflake.configure_default(backend="file", pg_url=URL)
    assert e.value.setting == "pg_url"


def test_a_server_that_does_not_answer_is_a_store_error_that_hides_the_password(table):
    secret = f"pw-{uuid.uuid4().hex}"
    with pytest.raises(monoflake.StoreError) as e:
        monoflake.Generator(
            backend="postgres", pg_url=f"postgres://monoflake:{secret}@127.0.0.1:9/x", pg_table=table
        )
    assert e.value.kind == "Store"
    assert secret not in str(e.value) and secret not in repr(e.value.__dict__)


def test_the_default_and_forked_children_claim_from_postgres(table, state_dir):
    """configure_default(backend="postgres"): the parent's first next_id() claims a node, and a
    forked child its own, from the same table."""
    from conftest import run_json

    out = run_json(
        rf"""
import json, os
import monoflake
monoflake.configure_default(backend="postgres", pg_url={URL!r}, pg_table={table!r})
parent = [monoflake.next_id() for _ in range(1000)]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    child = monoflake.next_ids(1000)
    os.write(w, json.dumps(child).encode())
    os._exit(0)
os.close(w)
data = b""
while chunk := os.read(r, 1 << 16):
    data += chunk
_, status = os.waitpid(pid, 0)
child = json.loads(data)
nodes = sorted({{monoflake.decode(i).node for i in parent}} | {{monoflake.decode(i).node for i in child}})
print(json.dumps({{"status": status, "unique": len(set(parent) | set(child)), "nodes": nodes}}))
""",
        state_dir,
    )
    assert out == {"status": 0, "unique": 2000, "nodes": [0, 1]}


# libfaketime, to move a running interpreter's wall clock (issue 60); PostgreSQL keeps the real
# one. Not the `faketime` wrapper: the library itself, preloaded, reading its offset from a file
# at every reading.
FAKETIME = next(iter(Path("/usr/lib").glob("*/faketime/libfaketime.so.1")), None)


def faked(clock: Path) -> dict[str, str]:
    """The environment of an interpreter whose wall clock `clock` sets (its monotonic clock is
    the real one). Under it `time.sleep` fails (EINVAL: libfaketime's clock_nanosleep); the
    children nap with select()."""
    return dict(
        os.environ,
        LD_PRELOAD=str(FAKETIME),
        FAKETIME_TIMESTAMP_FILE=str(clock),
        FAKETIME_NO_CACHE="1",
        FAKETIME_DONT_FAKE_MONOTONIC="1",
        PYTHONDONTWRITEBYTECODE="1",
    )


@pytest.mark.skipif(FAKETIME is None, reason="libfaketime is not installed")
def test_the_default_rides_through_wall_clock_steps_forward(table, tmp_path):
    """The default generator on PostgreSQL, its interpreter's wall clock stepped 2 s, a minute
    and an hour ahead, then back, while it issues: it keeps its lease (its clock follows the
    wall clock only as far as the database's confirms), so no call raises, no ID repeats, and
    none runs ahead of the real time by more than the lead and max_lead."""
    clock = tmp_path / "faketime"
    clock.write_text("+0\n")
    code = rf"""
import json, select, time, monoflake
nap = lambda s: select.select([], [], [], s)
monoflake.configure_default(backend="postgres", pg_url={URL!r}, pg_table={table!r})
ids, refused, ahead = [], [], 0
monoflake.next_id()
print("started", flush=True)
end = time.monotonic() + 14
while time.monotonic() < end:
    try:
        batch = monoflake.next_ids(100)
    except monoflake.LeaseLost as e:
        refused.append(str(e))
        nap(0.05)
        continue
    ids.extend(batch)
    real_ms = int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1000) + OFFSET
    ahead = max(ahead, monoflake.decode(batch[-1]).unix_ms - real_ms)
    nap(0.001)
print(json.dumps({{"ids": len(ids), "unique": len(set(ids)), "refused": refused[:3], "ahead": ahead}}))
"""
    # The real time, read in the child from its monotonic clock (not faked) plus this offset.
    offset = int((time.time() - time.clock_gettime(time.CLOCK_MONOTONIC)) * 1000)
    code = code.replace("OFFSET", str(offset))
    child = subprocess.Popen(
        [sys.executable, "-c", code], env=faked(clock), stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "started"
    for offset_s in ["+2", "+60", "+3600", "+0"]:
        time.sleep(3)
        clock.write_text(f"{offset_s}\n")
    out, _ = child.communicate(timeout=120)
    result = json.loads(out.strip().splitlines()[-1])
    print(f"issued {result['ids']}, at most {result['ahead']} ms ahead; refused {result['refused']}")
    assert result["refused"] == [], result
    assert result["ids"] > 0 and result["unique"] == result["ids"], result
    # The lead (250 ms), max_lead (100 ms), and the two readings' skew.
    assert result["ahead"] <= 400, result


@pytest.mark.skipif(FAKETIME is None, reason="libfaketime is not installed")
def test_the_default_claims_once_the_wall_clock_is_right(table, tmp_path):
    """The default's first claim with the interpreter's wall clock an hour ahead of the
    database's: LeaseLost, naming both clocks, at every call; once the wall clock is right,
    the next call claims (a fresh clock) and issues."""
    clock = tmp_path / "faketime"
    clock.write_text("+3600\n")
    code = rf"""
import json, select, time, monoflake
nap = lambda s: select.select([], [], [], s)
monoflake.configure_default(backend="postgres", pg_url={URL!r}, pg_table={table!r})
refused = []
while True:
    try:
        monoflake.next_id()
        break
    except monoflake.LeaseLost as e:
        refused.append(str(e))
        if len(refused) == 2:
            print("refused", flush=True)
        nap(0.1)
print(json.dumps({{"refused": len(refused), "first": refused[0]}}))
"""
    child = subprocess.Popen(
        [sys.executable, "-c", code], env=faked(clock), stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "refused"
    clock.write_text("+0\n")
    corrected = time.monotonic()
    out, _ = child.communicate(timeout=120)
    took = time.monotonic() - corrected
    result = json.loads(out.strip().splitlines()[-1])
    assert "ahead of the database's clock_timestamp()" in result["first"], result
    assert "this clock read " in result["first"] and "the database's 20" in result["first"]
    print(f"claimed {took:.2f} s after the wall clock was set right")
