#!/usr/bin/env python3
"""deploy/ says what the binary does: every flag and MONOFLAKE_* variable it names exists.

    python3 scripts/deploy-check.py target/debug/monoflake

The linters (systemd-analyze, hadolint, kubernetes-validate, yamllint: scripts/deploy-check.sh)
check each file's own language; this checks the files against `monoflake serve --help`,
`cli/src/serve/openapi.json` and each other, and the choices docs/service.md explains:
* every `--flag` and every `MONOFLAKE_*` variable in the Dockerfile, the systemd unit and the
  Kubernetes manifests is one `serve --help` names;
* the Dockerfile: several stages, the last one running as a user other than root, the state
  directory a VOLUME, the entry point the binary it copies in;
* the systemd unit: no PrivateNetwork= (the file store's host-wide claim is an abstract Unix
  socket of the host's network namespace), AF_UNIX allowed, and /var/tmp (the host anchors)
  writable when ProtectSystem=strict and no private /tmp;
* the manifests: each probe's path is a route of openapi.json, readiness on /readyz, ports the
  image exposes, a grace period longer than the drain;
* the Dockerfile's bases pinned by digest, and a HEALTHCHECK that runs `health` of the binary
  it copies.
Exits 1 naming each problem.
"""

import json
import re
import shlex
import subprocess
import sys

import yaml

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
VARIABLE = re.compile(r"\bMONOFLAKE_[A-Z0-9_]+")
DRAIN_TIMEOUT_S = 5
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}(\s|$)")
problems = []


def problem(where, what):
    problems.append(f"{where}: {what}")


def serve_help(binary):
    text = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True,
                          check=True).stdout
    flags = set(FLAG.findall(text))
    variables = set(re.findall(r"env: (MONOFLAKE_[A-Z0-9_]+)", text))
    # Read by `serve` (and every subcommand) but not a flag's: docs/service.md.
    variables |= {"MONOFLAKE_TOKEN", "MONOFLAKE_STATE_DIR", "MONOFLAKE_PG_URL",
                  "MONOFLAKE_ETCD_PASSWORD"}
    return flags, variables


def names(where, text, flags, variables, skip_flags=()):
    for flag in FLAG.findall(text):
        if flag not in flags and flag not in skip_flags:
            problem(where, f"{flag} is not a flag of monoflake serve")
    for variable in VARIABLE.findall(text):
        if variable not in variables:
            problem(where, f"{variable} is not a variable monoflake serve reads")


def dockerfile(path, flags, variables):
    lines, stages = [], []
    text = open(path).read().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((word, rest.strip()))
        lines.append((word, rest.strip()))
    if len(stages) < 2:
        problem(path, "not a multi-stage build")
        return
    for word, rest in lines:
        if word == "FROM" and not DIGEST.search(rest):
            problem(path, f"FROM {rest}: not pinned by digest (@sha256:...)")
    last = stages[-1]
    users = [rest for word, rest in last if word == "USER"]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        problem(path, "the last stage does not run as a user other than root")
    volumes = " ".join(rest for word, rest in last if word == "VOLUME")
    if "/var/lib/monoflake" not in volumes:
        problem(path, "the state directory /var/lib/monoflake is not a VOLUME")
    copied = [rest.split()[-1] for word, rest in last if word == "COPY" and "--from=" in rest]
    entry = [json.loads(rest) for word, rest in last if word == "ENTRYPOINT"]
    if not entry or entry[-1][0] not in copied or entry[-1][1:2] != ["serve"]:
        problem(path, f"the ENTRYPOINT {entry} is not `serve` of the binary copied in ({copied})")
    # Flags of the build stage are cargo's; only the last stage's are the service's.
    names(path, " ".join(rest for word, rest in last if word in ("ENTRYPOINT", "CMD", "ENV")),
          flags, variables)
    exposed = {int(p.split("/")[0]) for word, rest in last if word == "EXPOSE"
               for p in rest.split()}
    checks = [rest for word, rest in last if word == "HEALTHCHECK"]
    if not checks:
        problem(path, "the last stage has no HEALTHCHECK")
    else:
        options, _, command = checks[-1].partition("CMD")
        argv = json.loads(command.strip())
        if argv[:2] != [copied[-1] if copied else None, "health"]:
            problem(path, f"the HEALTHCHECK runs {argv}, not `health` of the binary copied in")
        given = dict(o.lstrip("-").split("=", 1) for o in options.split())
        probe = float(argv[argv.index("--timeout") + 1]) if "--timeout" in argv else 2.0
        if float(given.get("timeout", "30s").rstrip("s")) <= probe:
            problem(path, f"HEALTHCHECK --timeout {given.get('timeout')} is not longer than "
                          f"the probe's own {probe} s")
    return exposed


def unit(path, flags, variables):
    settings = {}
    text = open(path).read().replace("\\\n", " ")
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    for value in settings.get("ExecStart", []):
        argv = shlex.split(value)
        if argv[1:2] != ["serve"]:
            problem(path, f"ExecStart is not monoflake serve: {value}")
        names(path, value, flags, variables)
    for value in settings.get("Environment", []):
        names(path, value, flags, variables)
    if settings.get("PrivateNetwork", ["no"])[-1] not in ("no", "false", "0"):
        problem(path, "PrivateNetwork= hides the host-wide claims (abstract Unix sockets)")
    families = " ".join(settings.get("RestrictAddressFamilies", ["AF_UNIX"]))
    if "AF_UNIX" not in families.split() or families.startswith("~"):
        problem(path, "RestrictAddressFamilies= must allow AF_UNIX (the host-wide claim)")
    strict = settings.get("ProtectSystem", ["no"])[-1] == "strict"
    private_tmp = settings.get("PrivateTmp", ["no"])[-1] in ("yes", "true", "1")
    writable = " ".join(settings.get("ReadWritePaths", [])).split()
    if strict and not private_tmp and "/var/tmp" not in writable:
        problem(path, "ProtectSystem=strict leaves /var/tmp (the host anchors) read-only")
    for key in ("User", "StateDirectory"):
        if key not in settings:
            problem(path, f"no {key}=")


def manifests(path, flags, variables, routes, exposed):
    with open(path) as f:
        documents = [d for d in yaml.safe_load_all(f) if d]
    kinds = [d.get("kind") for d in documents]
    if "StatefulSet" not in kinds:
        problem(path, f"no StatefulSet among {kinds}")
    for d in documents:
        where = f"{path}: {d.get('kind')}/{d.get('metadata', {}).get('name')}"
        pod = d.get("spec", {}).get("template", {}).get("spec")
        if not pod:
            continue
        grace = pod.get("terminationGracePeriodSeconds", 30)
        for c in pod["containers"]:
            names(where, " ".join(c.get("args", []) + c.get("command", [])), flags, variables)
            for e in c.get("env", []):
                names(where, e["name"], flags, variables)
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            if exposed is not None and set(ports.values()) - exposed:
                problem(where, f"ports {sorted(ports.values())} beyond the image's {exposed}")
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                get = c.get(probe, {}).get("httpGet")
                if get and get["path"] not in routes:
                    problem(where, f"{probe} on {get['path']}, not a route of openapi.json")
                if get and get.get("port") not in ports and get.get("port") not in ports.values():
                    problem(where, f"{probe} on port {get.get('port')}, not a container port")
            if c.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/readyz":
                problem(where, "readiness is not probed on /readyz")
            pre_stop = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {})
            if grace <= DRAIN_TIMEOUT_S + pre_stop.get("seconds", 0):
                problem(where, f"terminationGracePeriodSeconds {grace} leaves no time to drain")


def main():
    binary = sys.argv[1]
    flags, variables = serve_help(binary)
    with open("cli/src/serve/openapi.json") as f:
        routes = set(json.load(f)["paths"])
    exposed = dockerfile("deploy/docker/Dockerfile", flags, variables)
    unit("deploy/systemd/monoflake.service", flags, variables)
    manifests("deploy/kubernetes/monoflake.yaml", flags, variables, routes, exposed)
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print("deploy/: the Dockerfile, the systemd unit and the Kubernetes manifests name only "
          "what monoflake serve has")


if __name__ == "__main__":
    main()
