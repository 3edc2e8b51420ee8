#!/usr/bin/env python3
"""Boundary mutants: the one-token bugs reviews find here and cargo-mutants does not make.

    python3 scripts/boundary-mutants.py list  [GROUP...] [--only REGEX]
    python3 scripts/boundary-mutants.py run   [GROUP...] [--only REGEX] [--limit N] [options]
    python3 scripts/boundary-mutants.py patch ID             a mutant as a patch (for
                                                             scripts/mutants/, the mutant suite)

Groups (default: generator):
    generator   src/generator/**.rs, tested by the generator's quick set (as
                scripts/cargo-mutants.sh's: --lib and the generator's test binaries)
    lease       src/lease/**.rs, tested by the lease's quick set (--lib, lease, fence_boundary, store_conformance,
                epochs, trust, per_core_lease, per_thread; needs MONOFLAKE_TEST_ETCD and
                MONOFLAKE_TEST_PG for the stores' conformance tests)
    pg          pg/src/shared.rs (the PostgreSQL extension's shared word), checked by
                scripts/pg-extension-test.sh: it installs the extension into the system's
                PostgreSQL, so run it only where nothing else uses that server

The mutations, each applied alone (never in comments, `#[cfg(test)]` modules, or items built
only for loom or for the suite's own mutants):
    plus1      `+ 1` / `- 1` dropped or flipped; `+= 1` / `-= 1` made `+= 0` or flipped
    sat1       `.saturating_sub(1)` / `.saturating_add(1)` dropped
    tick       `tick_at` / `last_tick_before` / `first_tick_from` / `deadline_tick` swapped for
               each other (in src/lease/, where all four can be called)
    maxmin     `.max(` <-> `.min(`
    cmp        ` < ` <-> ` <= `, ` > ` <-> ` >= ` at a comparison
    ok         a `?` that ends a statement writing to a store (extend, restore, release, a
               record or an anchor written) turned into `.ok()`: the failure ignored

`run` works in a scratch copy of the working tree (never the tree itself), by default
target/boundary/<group>/tree, with a target directory of its own beside it (the dependencies
build once; each mutant rebuilds the workspace's crates only). It first runs the group's tests
on the unmutated copy (they must pass), then for each mutant: the mutated file written, the
tests built (a build that fails: `unviable`), run under `timeout` (`timeout`), and recorded as
`caught` (with the tests that failed and the first line of the first one's message) or
`missed`. Results go to <out>/results.tsv as they come (`--resume` skips what is there) and,
at the end, to <out>/table.md. Options:
    --tests "ARGS"      the cargo test selection instead of the group's
    --features F        cargo features (default: the group's)
    --build CMD --check CMD   shell commands instead of cargo test (the pg group's)
    --timeout S         per mutant's tests (default 300)
    --out DIR           default target/boundary/<group>
    --keep              keep the copy and its build at the end
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

GEN_TESTS = ("--lib --test generator --test per_core --test per_core_lease --test per_thread "
             "--test fork --test inputs --test features --test layouts --test alloc")
LEASE_TESTS = ("--lib --test lease --test fence_boundary --test store_conformance --test epochs "
               "--test trust --test per_core_lease --test per_thread")
GROUPS = {
    "generator": {"files": ["src/generator/**/*.rs"], "tests": GEN_TESTS, "features": ""},
    "lease": {"files": ["src/lease/**/*.rs"], "tests": LEASE_TESTS,
              "features": "etcd,postgres"},
    "pg": {"files": ["pg/src/shared.rs"],
           "build": "cargo build -p monoflake-pg",
           "check": "bash scripts/pg-extension-test.sh"},
}

TICK_FNS = ["tick_at", "last_tick_before", "first_tick_from", "deadline_tick"]
FREE_TICK = re.compile(r"(?<![\w.:])(?<!fn )(last_tick_before|first_tick_from|deadline_tick)\(")
METHOD_TICK = re.compile(r"\.tick_at\(")
WRITES = re.compile(r"\b(extend|restore|release|write\w*|write_anchor|persist\w*|rename\w*|"
                    r"sync_all|sync_data|fsync\w*|store_\w+|put|insert\w*|update\w*|execute)\s*\(")
SKIP_ATTR = re.compile(r"^\s*#\[cfg\((any\(|all\()?\s*(test|loom|monoflake_)")


class Mutant:
    def __init__(self, path, line, col, op, old, new, text):
        self.path, self.line, self.col, self.op, self.old, self.new, self.text = \
            path, line, col, op, old, new, text

    @property
    def id(self):
        """`path:line:column:operator:old->new`, unique in a tree (not across edits of the file)."""
        return f"{self.path}:{self.line}:{self.col}:{self.op}:{self.old}->{self.new}"


def code_part(line):
    """The line without its comment (a `//` outside a string literal)."""
    in_str = False
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\" and in_str:
            i += 2
            continue
        if c == '"':
            in_str = not in_str
        elif not in_str and line.startswith("//", i):
            return line[:i]
        i += 1
    return line


def skipped_lines(lines):
    """Indexes of lines inside `#[cfg(test)]` modules and loom- or mutant-only items."""
    skip = set()
    i = 0
    while i < len(lines):
        if SKIP_ATTR.match(lines[i]):
            # The attribute, further attributes, and the item after them to its end.
            j = i
            while j < len(lines) and lines[j].strip().startswith("#["):
                skip.add(j)
                j += 1
            depth = 0
            opened = False
            while j < len(lines):
                code = code_part(lines[j])
                skip.add(j)
                for c in code:
                    if c == "{":
                        depth += 1
                        opened = True
                    elif c == "}":
                        depth -= 1
                if (opened and depth <= 0) or (not opened and code.rstrip().endswith(";")):
                    break
                j += 1
            i = j + 1
            continue
        i += 1
    return skip


def balanced(text, open_at):
    """The index just past the `)` matching the `(` at `open_at`, or None."""
    depth = 0
    for k in range(open_at, len(text)):
        if text[k] == "(":
            depth += 1
        elif text[k] == ")":
            depth -= 1
            if depth == 0:
                return k + 1
    return None


def split_args(inner):
    depth, parts, cur = 0, [], ""
    for c in inner:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        parts.append(cur.strip())
    return parts


def receiver_start(text, dot):
    """Where the receiver of the method call whose `.` is at `dot` begins."""
    k = dot
    while k > 0:
        c = text[k - 1]
        if c.isalnum() or c in "_.&":
            k -= 1
        elif c == ")":
            depth = 0
            while k > 0:
                k -= 1
                if text[k] == ")":
                    depth += 1
                elif text[k] == "(":
                    depth -= 1
                    if depth == 0:
                        break
        else:
            break
    return k


def line_mutants(path, lineno, line, in_lease):
    code = code_part(line)
    out = []

    def add(op, start, end, new, old=None):
        old = code[start:end] if old is None else old
        out.append(Mutant(path, lineno, start + 1, op, old.strip(), new.strip(),
                          line[:start] + new + line[end:]))

    for m in re.finditer(r"(?<=\s)([+-]) 1\b(?![._0-9])", code):
        sign = m.group(1)
        # ` + 1` dropped (with the space before it) and flipped.
        add("plus1", m.start() - 1, m.end(), "", old=f"{sign} 1")
        add("plus1", m.start(), m.end(), ("-" if sign == "+" else "+") + " 1")
    for m in re.finditer(r"([+-])= 1\b(?![._0-9])", code):
        sign = m.group(1)
        add("plus1", m.start(), m.end(), f"{sign}= 0")
        add("plus1", m.start(), m.end(), ("-" if sign == "+" else "+") + "= 1")
    for m in re.finditer(r"\.saturating_(sub|add)\(1\)", code):
        add("sat1", m.start(), m.end(), "", old=m.group(0))
    for m in re.finditer(r"\.(max|min)\(", code):
        other = "min" if m.group(1) == "max" else "max"
        add("maxmin", m.start(), m.end(), f".{other}(")
    for m in re.finditer(r"(?<= )(<=|>=|<|>)(?= )", code):
        swap = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}[m.group(1)]
        add("cmp", m.start(), m.end(), swap)
    if in_lease:
        for m in FREE_TICK.finditer(code):
            end = balanced(code, m.end() - 1)
            if end is None:
                continue
            args = split_args(code[m.end():end - 1])
            if len(args) != 2:
                continue
            layout, arg = args
            for other in TICK_FNS:
                if other == m.group(1):
                    continue
                if other == "tick_at":
                    new = f"({layout}).tick_at({arg})"
                else:
                    new = f"crate::lease::handover::{other}({layout}, {arg})"
                add("tick", m.start(), end, new)
        for m in METHOD_TICK.finditer(code):
            start = receiver_start(code, m.start())
            end = balanced(code, m.end() - 1)
            if end is None or start == m.start():
                continue
            recv = code[start:m.start()]
            arg = code[m.end():end - 1]
            for other in TICK_FNS[1:]:
                add("tick", start, end, f"crate::lease::handover::{other}(&{recv}, {arg})")
    return out


def statement_writes(lines, idx, col):
    """Whether the statement ending at lines[idx][col] (a `?;`) writes to a store."""
    text = code_part(lines[idx])[:col]
    j = idx
    while j > 0 and not re.search(r"[;{}]\s*$", code_part(lines[j - 1])):
        j -= 1
        text = code_part(lines[j]) + "\n" + text
    head = text.lstrip()
    return not head.startswith(("let ", "return ", "Ok(")) and WRITES.search(text) is not None


def mutants_of(path):
    with open(os.path.join(ROOT, path)) as f:
        lines = f.read().split("\n")
    skip = skipped_lines(lines)
    in_lease = path.startswith("src/lease/")
    found = []
    for i, line in enumerate(lines):
        if i in skip:
            continue
        if line.strip().startswith(("//", "#[", "#!")):
            continue
        for m in line_mutants(path, i + 1, line, in_lease):
            found.append((i, m))
        code = code_part(line)
        for m in re.finditer(r"\?;", code):
            if statement_writes(lines, i, m.start()):
                new = line[:m.start()] + ".ok();" + line[m.end():]
                found.append((i, Mutant(path, i + 1, m.start() + 1, "ok", "?", ".ok()", new)))
    return lines, found


def files_of(group):
    paths = []
    for pattern in GROUPS[group]["files"]:
        for p in sorted(glob.glob(os.path.join(ROOT, pattern), recursive=True)):
            # Test modules in files of their own (`#[cfg(test)] mod tests;`).
            if os.path.basename(p) in ("tests.rs", "test.rs"):
                continue
            paths.append(os.path.relpath(p, ROOT))
    return paths


def all_mutants(groups, only):
    out = []
    for g in groups:
        for path in files_of(g):
            lines, found = mutants_of(path)
            for i, m in found:
                if only and not re.search(only, m.id):
                    continue
                out.append((g, lines, i, m))
    return out


def sh(cmd, cwd, env, log, timeout=None):
    """Runs `cmd` (a shell command) in `cwd`, appending to `log`; its exit code (124: timeout)."""
    with open(log, "a") as out:
        out.write(f"$ {cmd}\n")
        out.flush()
        full = cmd if timeout is None else f"timeout -k 10 {timeout} bash -c {shquote(cmd)}"
        return subprocess.call(full, shell=True, cwd=cwd, env=env, stdout=out,
                               stderr=subprocess.STDOUT)


def shquote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def failed_tests(log_text):
    names = re.findall(r"^test (.*) \.\.\. FAILED$", log_text, re.M)
    first = ""
    if names:
        block = re.search(r"^---- " + re.escape(names[0]) + r" stdout ----\n(.*?)(?=^---- |^failures:)",
                          log_text, re.M | re.S)
        if block:
            for l in block.group(1).splitlines():
                if l.strip() and " panicked at " not in l and not l.startswith("proptest: "):
                    first = l.strip()[:160]
                    break
    return names, first


def copy_tree(dest):
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    tar = subprocess.Popen(["tar", "-C", ROOT, "--exclude=./target", "--exclude=./.git",
                            "--exclude=./python/.venv", "-cf", "-", "."], stdout=subprocess.PIPE)
    # -m: every file dated now, newer than anything a kept build made from a mutant.
    subprocess.check_call(["tar", "-C", dest, "-xmf", "-"], stdin=tar.stdout)
    tar.wait()


def run(args, groups):
    group = groups[0]
    if len(groups) > 1:
        sys.exit("boundary-mutants: run one group at a time")
    spec = GROUPS[group]
    out = os.path.abspath(args.out or os.path.join(ROOT, "target", "boundary", group))
    os.makedirs(out, exist_ok=True)
    tree = os.path.join(out, "tree")
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(out, "target"), CARGO_TERM_COLOR="never")
    features = args.features if args.features is not None else spec.get("features", "")
    feat = f" --features {features}" if features else ""
    tests = args.tests or spec.get("tests", "")
    build = args.build or spec.get("build") or f"cargo test -p monoflake{feat} --no-run {tests}"
    check = args.check or spec.get("check") or f"cargo test -p monoflake{feat} {tests}"
    mutants = all_mutants(groups, args.only)
    if args.limit:
        mutants = mutants[:args.limit]
    results = os.path.join(out, "results.tsv")
    done = {}
    if args.resume and os.path.exists(results):
        for l in open(results):
            parts = l.rstrip("\n").split("\t")
            if len(parts) >= 2 and parts[0] != "id":
                done[parts[0]] = parts
    else:
        with open(results, "w") as f:
            f.write("id\toutcome\tseconds\tfailed tests\tfirst line\n")
    print(f"boundary-mutants: {len(mutants)} mutants of {group} ({len(done)} done before); "
          f"build `{build}`, check `{check}`, {args.timeout} s each; results in {results}",
          flush=True)
    copy_tree(tree)
    log = os.path.join(out, "baseline.log")
    open(log, "w").close()
    t0 = time.time()
    if sh(build, tree, env, log) != 0 or sh(check, tree, env, log, args.timeout) != 0:
        sys.exit(f"boundary-mutants: the tests fail on the unmutated tree (see {log})")
    print(f"baseline: built and passed in {time.time() - t0:.0f} s", flush=True)
    counts = {}
    for n, (_, lines, i, m) in enumerate(mutants, 1):
        if m.id in done:
            continue
        path = os.path.join(tree, m.path)
        original = "\n".join(lines)
        mutated = "\n".join(lines[:i] + [m.text] + lines[i + 1:])
        log = os.path.join(out, "last.log")
        open(log, "w").close()
        start = time.time()
        os.remove(path)  # a new file, a new modification time: cargo rebuilds it
        with open(path, "w") as f:
            f.write(mutated)
        try:
            if sh(build, tree, env, log) != 0:
                outcome, names, first = "unviable", [], ""
            else:
                rc = sh(check, tree, env, log, args.timeout)
                text = open(log, errors="replace").read()
                names, first = failed_tests(text)
                if re.search(r"^error(\[E\d+\])?: could not compile", text, re.M):
                    outcome = "unviable"
                elif rc in (124, 137):
                    outcome = "timeout"
                elif rc == 0:
                    outcome = "missed"
                else:
                    outcome = "caught"
                    if not names:
                        # A script's checks (the pg group's): its first "FAILED: …" line and
                        # how many there were; else the log's last line.
                        checks = re.findall(r"^FAILED: .*$", text, re.M)
                        if checks:
                            more = f" (+{len(checks) - 1} more)" if len(checks) > 1 else ""
                            first = checks[0][:200] + more
                        else:
                            first = text.strip().splitlines()[-1][:160] if text.strip() else ""
        finally:
            os.remove(path)
            with open(path, "w") as f:
                f.write(original)
        secs = time.time() - start
        counts[outcome] = counts.get(outcome, 0) + 1
        with open(results, "a") as f:
            f.write(f"{m.id}\t{outcome}\t{secs:.0f}\t{' '.join(names)}\t{first}\n")
        print(f"[{n}/{len(mutants)}] {outcome:8} {secs:4.0f} s  {m.id}"
              + (f"  <- {names[0]}: {first}" if outcome == "caught" and names
                 else f"  <- {first}" if outcome == "caught" else ""),
              flush=True)
    write_table(results, os.path.join(out, "table.md"))
    print("boundary-mutants: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    if not args.keep:
        shutil.rmtree(tree, ignore_errors=True)
        shutil.rmtree(os.path.join(out, "target"), ignore_errors=True)


def write_table(results, path):
    rows = [l.rstrip("\n").split("\t") for l in open(results)][1:]
    with open(path, "w") as f:
        f.write("| mutant | outcome | killed by |\n|---|---|---|\n")
        for r in rows:
            r += [""] * (5 - len(r))
            mid, outcome, _, names, first = r[:5]
            where, line, _col, op, change = mid.split(":", 4)
            killer = f"`{names.split()[0]}`: {first}" if names else first
            f.write(f"| `{where}:{line}` {op} `{change}` | {outcome} | "
                    f"{killer.replace('|', '/')} |\n")


def patch_of(mutant_id):
    for _, lines, i, m in all_mutants(list(GROUPS), None):
        if m.id == mutant_id:
            import difflib
            a = [l + "\n" for l in lines]
            b = a[:i] + [m.text + "\n"] + a[i + 1:]
            return "".join(difflib.unified_diff(a, b, f"a/{m.path}", f"b/{m.path}"))
    sys.exit(f"boundary-mutants: no mutant {mutant_id} (`list` shows them)")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["list", "run", "patch"])
    p.add_argument("rest", nargs="*", help="groups (list, run) or a mutant's id (patch)")
    p.add_argument("--only")
    p.add_argument("--limit", type=int)
    p.add_argument("--tests")
    p.add_argument("--features")
    p.add_argument("--build")
    p.add_argument("--check")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--out")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    if args.command == "patch":
        if len(args.rest) != 1:
            sys.exit("boundary-mutants: patch takes one mutant id")
        sys.stdout.write(patch_of(args.rest[0]))
        return
    groups = args.rest or ["generator"]
    for g in groups:
        if g not in GROUPS:
            sys.exit(f"boundary-mutants: no group {g} ({', '.join(GROUPS)})")
    if args.command == "list":
        by_op = {}
        for g, _, _, m in all_mutants(groups, args.only):
            print(m.id)
            by_op[m.op] = by_op.get(m.op, 0) + 1
        print("# " + ", ".join(f"{v} {k}" for k, v in sorted(by_op.items())), file=sys.stderr)
        return
    run(args, groups)


if __name__ == "__main__":
    main()
