#!/usr/bin/env python3
"""Every `monoflake` subcommand and flag that the documentation names exists in `--help`.

    python3 scripts/doc-flags.py target/debug/monoflake README.md docs/*.md

Reads every code span and code block of the given Markdown files. A command line that starts
with `monoflake` (also after `$ ` or in a pipeline) names a subcommand and flags: each must be
in that subcommand's `--help` (the binary is asked, so it must be built with every feature
the docs use: `cargo test --all-features` builds it so). A code span that is a lone flag
(`--pg-table`, `--pg-table T`) must be a flag of some subcommand, unless it is one of the
other tools' flags the docs also name (cargo, the chaos soak, the load script, protoc), listed
below. Prints what it checked; exits 1 naming each flag or subcommand that is not there.
"""

import re
import subprocess
import sys

# Flags the docs name that belong to other tools: cargo and rustc, scripts/chaos.sh and
# monoflake-chaos (and its holder's --flavour), scripts/mutants.sh, scripts/soak-power.sh,
# scripts/boundary-mutants.py, scripts/load.sh, the protobuf and gRPC generators, and
# criterion.
OTHER_TOOLS = {
    "--release", "--features", "--all-features", "--bench", "--cfg", "--seconds", "--seed",
    "--scenarios", "--runs", "--recovery-ms", "--outage-ms", "--fault-every-ms", "--prefix",
    "--pipeline", "--go", "--go-grpc", "--latency", "--open", "--dir-only",
    "--include-ignored", "--nocapture", "--test", "--no-default-features", "--workspace",
    "--all-targets", "--lib", "--doc", "--python_out", "--grpc_python_out", "--proto_path",
    "--js_out", "--java_out", "--go_out", "--go-grpc_out", "--go_opt", "--go-grpc_opt",
    "--plaintext", "--import-path", "--proto", "--connections", "--duration-s",
    "--flavour", "--cheap", "--list", "--no-baseline", "--keep", "--full", "--iterate", "--re",
    "--servers", "--resume", "--only",
}

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def help_text(binary, words):
    out = subprocess.run([binary, *words, "--help"], capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return out.stdout


def subcommands(text):
    """The subcommands a --help lists under "Commands:"."""
    names, inside = [], False
    for line in text.splitlines():
        if line.startswith("Commands:"):
            inside = True
            continue
        if inside:
            if not line.startswith("  "):
                break
            word = line.split()[0]
            if word != "help":
                names.append(word)
    return names


def main():
    binary, files = sys.argv[1], sys.argv[2:]
    top = help_text(binary, [])
    if top is None:
        sys.exit(f"doc-flags: {binary} --help failed")
    helps = {(): top}
    todo = [()]
    while todo:
        words = todo.pop()
        for sub in subcommands(helps[words]):
            path = words + (sub,)
            text = help_text(binary, list(path))
            if text is not None:
                helps[path] = text
                todo.append(path)
    flags_of = {path: set(FLAG.findall(text)) for path, text in helps.items()}
    every_flag = set().union(*flags_of.values())

    missing, checked_lines, checked_flags = [], 0, 0
    for name in files:
        text = open(name, encoding="utf-8").read()
        blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)
        spans = re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))
        lines = []
        for block in blocks:
            current = None
            for line in block.splitlines():
                stripped = line.strip()
                if stripped.startswith("[") and current is not None:
                    current += " " + stripped  # a synopsis continued
                    continue
                if current is not None:
                    lines.append(current)
                current = stripped
            if current is not None:
                lines.append(current)
        lines += spans
        for line in lines:
            for part in re.split(r"[|;]|&&", line):
                words = part.strip().removeprefix("$ ").split()
                if not words:
                    continue
                if words[0] == "monoflake":
                    checked_lines += 1
                    path = ()
                    for w in words[1:]:
                        if path + (w,) in helps:
                            path = path + (w,)
                        elif not w.startswith("-") and not path and re.fullmatch(r"[a-z]+", w):
                            missing.append(f"{name}: subcommand `monoflake {w}` ({line})")
                            break
                        else:
                            break
                    for flag in FLAG.findall(part):
                        checked_flags += 1
                        if flag not in flags_of[path] and flag not in flags_of[()]:
                            missing.append(f"{name}: `{flag}` of `monoflake {' '.join(path)}` ({line.strip()})")
                elif len(words) <= 2 and FLAG.fullmatch(words[0]):
                    checked_flags += 1
                    if words[0] not in every_flag and words[0] not in OTHER_TOOLS:
                        missing.append(f"{name}: `{words[0]}` is no monoflake flag ({line.strip()})")
    print(
        f"doc-flags: {len(helps)} help pages, {checked_lines} command lines and "
        f"{checked_flags} flags in {len(files)} files checked"
    )
    for m in missing:
        print(f"doc-flags: not in --help: {m}")
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
