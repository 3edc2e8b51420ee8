"""The PostgreSQL backend (`backend="postgres"`), against the server `.ci/run` starts
($MONOFLAKE_TEST_PG, the variable the Rust tests read too). Skipped only when that variable is
absent; with it set, a build without the `postgres` feature fails here.

Each test keeps its rows in a table of its own, so runs and the Rust tests sharing the server
never see each other's nodes.
"""

from __future__ import annotations

import os
import uuid

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
