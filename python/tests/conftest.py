"""Fixtures: private state directories, the `monoflake` CLI, and fresh Python processes.

The process-wide default generator is built once per process, so tests of it run in a fresh
interpreter (`run_python`), as do tests of what may hang, each with a timeout and
`faulthandler` armed (`python_command`). This process never touches the host-wide state directory: the
session points `MONOFLAKE_STATE_DIR` at a private directory of its own before anything runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

_session_dir = tempfile.mkdtemp(prefix="monoflake-pytest-")
os.chmod(_session_dir, 0o700)
os.environ["MONOFLAKE_STATE_DIR"] = _session_dir


# A bit shape (40 time, 11 node, 12 sequence bits) that nothing else on a host is likely to
# use. Node IDs are claimed host-wide per bit shape, whatever the state directory: a test that
# says which node a claim takes uses this shape, so that another process holding a low node of
# Twitter's shape (a service under test in another checkout) cannot change the answer.
PRIVATE_SHAPE = "time=40,worker=11,sequence=12,epoch=2024-01-01"


def private_dir(prefix: str = "monoflake-test-") -> Path:
    """A new directory only this user can use (mode 0700), as a state directory must be."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o700)
    return path


@pytest.fixture
def state_dir():
    path = private_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _find_cli() -> Path | None:
    explicit = os.environ.get("MONOFLAKE_CLI")
    if explicit:
        return Path(explicit)
    for profile in ("release", "debug"):
        candidate = REPO / "target" / profile / "monoflake"
        if candidate.exists():
            return candidate
    return None


@pytest.fixture(scope="session")
def cli() -> Path:
    """The `monoflake` binary: $MONOFLAKE_CLI, else the workspace's target/{release,debug}.
    Under CI (where .ci/run builds it first) a missing binary fails the test."""
    path = _find_cli()
    if path is None or not path.exists():
        if os.environ.get("CI"):
            pytest.fail("the monoflake CLI was not built (set MONOFLAKE_CLI)")
        pytest.skip("the monoflake CLI is not built: cargo build -p monoflake-cli")
    return path


def python_command(code: str, hang: float) -> list[str]:
    """A fresh interpreter running `code`, armed first with
    `faulthandler.dump_traceback_later(hang, exit=True)`: one that hangs prints every thread's
    traceback and exits 1 after `hang` seconds, so that a test fails with the place it hung."""
    arm = f"import faulthandler; faulthandler.dump_traceback_later({hang}, exit=True)\n"
    return [sys.executable, "-c", arm + code]


def run_python(
    code: str, state_dir: Path | None = None, timeout: float = 120, hang: float | None = None
) -> str:
    """Runs `code` in a fresh interpreter (`python_command`; `hang` defaults to 10 s before
    `timeout`) whose default state directory is `state_dir` (else the session's); returns its
    standard output, failing the test with its standard error when it fails."""
    env = dict(os.environ)
    if state_dir is not None:
        env["MONOFLAKE_STATE_DIR"] = str(state_dir)
    done = subprocess.run(
        python_command(code, hang if hang is not None else max(1.0, timeout - 10)),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        pytest.fail(f"the child interpreter failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def run_json(
    code: str, state_dir: Path | None = None, timeout: float = 120, hang: float | None = None
):
    """`run_python`, its last line read as JSON."""
    out = run_python(code, state_dir, timeout, hang)
    return json.loads(out.strip().splitlines()[-1])
