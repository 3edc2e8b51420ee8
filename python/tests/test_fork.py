"""Fork safety: prefork workers get nodes of their own, and no two processes share an ID.

Each scenario runs in a fresh interpreter (its own process-wide default generator), with a
private state directory.
"""

from __future__ import annotations

import array
import json
from pathlib import Path

from conftest import private_dir, run_json

import monoflake

PREFORK = r"""
import array, json, os, sys
import monoflake

out = sys.argv[1]
WORKERS, PER_WORKER = 8, 250_000

def dump(name, ids):
    with open(os.path.join(out, name), "wb") as f:
        array.array("Q", ids).tofile(f)

# The parent issues before forking, from the default and from a Generator of its own.
parent = [monoflake.next_id() for _ in range(10_000)]
explicit = monoflake.Generator()
explicit_ids = explicit.next_ids(10_000)
pids = []
for w in range(WORKERS):
    pid = os.fork()
    if pid == 0:
        try:
            ids = [monoflake.next_id() for _ in range(PER_WORKER // 2)]
            ids += monoflake.next_ids(PER_WORKER - len(ids))
            try:
                explicit.next_id()
                forked = "issued"
            except monoflake.Forked as e:
                forked = e.node
            explicit.close()  # a child's close gives nothing of the parent's up
            if w == 0:  # a worker's worker
                gpid = os.fork()
                if gpid == 0:
                    dump("grandchild", [monoflake.next_id() for _ in range(50_000)])
                    os._exit(0)
                os.waitpid(gpid, 0)
            dump(f"worker-{w}", ids)
            with open(os.path.join(out, f"worker-{w}.json"), "w") as f:
                json.dump({"forked": forked}, f)
            os._exit(0)
        except BaseException as e:
            print(f"worker {w}: {e!r}", file=sys.stderr)
            os._exit(1)
    pids.append(pid)
# The parent goes on issuing while its workers run.
parent += [monoflake.next_id() for _ in range(100_000)]
explicit_ids += explicit.next_ids(10_000)
codes = [os.waitpid(pid, 0)[1] for pid in pids]
dump("parent", parent)
dump("explicit", explicit_ids)
print(json.dumps({"codes": codes, "explicit_node": explicit.node}))
"""


def read(path: Path) -> list[int]:
    ids = array.array("Q")
    ids.frombytes(path.read_bytes())
    return ids.tolist()


def test_eight_forked_workers_never_share_an_id_or_a_node(state_dir):
    out = private_dir("monoflake-prefork-out-")
    result = run_json(
        f"import sys; sys.argv = ['prefork', {str(out)!r}]\n" + PREFORK, state_dir, timeout=300
    )
    assert result["codes"] == [0] * 8
    runs = {p.name: read(p) for p in out.iterdir() if not p.name.endswith(".json")}
    assert set(runs) == {"parent", "explicit", "grandchild"} | {f"worker-{w}" for w in range(8)}
    total = sum(len(ids) for ids in runs.values())
    assert total == 110_000 + 20_000 + 8 * 250_000 + 50_000
    everything = set()
    for ids in runs.values():
        everything.update(ids)
    assert len(everything) == total, "an ID was issued twice"
    nodes = {}
    for name, ids in runs.items():
        assert ids == sorted(ids), f"{name}'s IDs go back"
        run_nodes = {monoflake.decode(i).node for i in ids}
        assert len(run_nodes) == 1, f"{name} issued on several nodes"
        nodes[name] = run_nodes.pop()
    # Every process issued on a node of its own (the parent's explicit Generator too).
    assert len(set(nodes.values())) == len(nodes)
    # In each worker the parent's explicit Generator refused with Forked, naming its node.
    for w in range(8):
        status = json.loads((out / f"worker-{w}.json").read_text())
        assert status["forked"] == result["explicit_node"]


POOL = r"""
import json, multiprocessing, os
import monoflake

def work(_):
    return os.getpid(), monoflake.next_ids(20_000)

if __name__ == "__main__":
    first = monoflake.next_id()
    with multiprocessing.get_context("fork").Pool(4) as pool:
        results = pool.map(work, range(40))
    ids = [first] + [i for _, batch in results for i in batch]
    by_pid = {}
    for pid, batch in results:
        by_pid.setdefault(pid, set()).update(monoflake.decode(i).node for i in batch)
    print(json.dumps({
        "n": len(ids),
        "unique": len(set(ids)),
        "parent_node": monoflake.decode(first).node,
        "nodes": [sorted(n) for n in by_pid.values()],
    }))
"""


def test_multiprocessing_fork_pool_workers_claim_their_own_nodes(state_dir):
    result = run_json(POOL, state_dir, timeout=300)
    assert result["n"] == result["unique"] == 1 + 40 * 20_000
    per_worker = result["nodes"]
    assert all(len(nodes) == 1 for nodes in per_worker)  # one node per worker process
    worker_nodes = [nodes[0] for nodes in per_worker]
    assert len(set(worker_nodes)) == len(worker_nodes)
    assert result["parent_node"] not in worker_nodes


def test_the_default_in_a_child_is_built_with_the_parents_configuration(state_dir):
    result = run_json(
        f"""
import json, os, monoflake
monoflake.configure_default("discord", state_dir={str(state_dir)!r})
a = monoflake.next_id()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    b = monoflake.next_id()
    os.write(w, json.dumps(b).encode())
    os._exit(0)
os.waitpid(pid, 0)
b = json.loads(os.read(r, 100))
print(json.dumps([a, b]))
""",
        private_dir(),
    )
    a, b = result
    pa, pb = monoflake.decode(a, "discord"), monoflake.decode(b, "discord")
    assert pa.node != pb.node
    assert (Path(state_dir) / "discord").is_dir()
