#!/usr/bin/env python3
"""deploy/ says what the binary does, and its pod starts: every flag and MONOFLAKE_* variable
it names exists, and the Kubernetes manifest's pod runs as its user on its volumes.

    MONOFLAKE_TEST_PG=postgres://... python3 scripts/deploy-check.py target/debug/monoflake \
        [--manifest FILE] [--dockerfile FILE] [--pod-only]

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
* the Dockerfile's bases pinned by digest, and a HEALTHCHECK that runs the binary it copies;
* the pod (`pod` below), as root: the manifest's Secret volumes written with the kubelet's
  owners and modes (fsGroup included) under a temporary directory, the binary (as the image
  has it) started as the manifest's user and groups, in the image's and the manifest's
  environment (paths into the volumes and the listeners' ports mapped to the temporary
  directory and free loopback ports), on a read-only root file system when the manifest says
  so; its startup, readiness and liveness probes must answer 200 as the kubelet asks them,
  the Dockerfile's HEALTHCHECK command must exit 0, and SIGTERM must end it with 0 within the
  grace. The PostgreSQL of $MONOFLAKE_TEST_PG holds its lease (a database made and dropped
  for it).
Exits 1 naming each problem.
"""

import argparse
import base64
import http.client
import json
import os
import re
import shlex
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import time
import urllib.parse

import yaml

from free_port import free_port

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
VARIABLE = re.compile(r"\bMONOFLAKE_[A-Z0-9_]+")
DRAIN_TIMEOUT_S = 5
DRAIN_GRACE_S = 1
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
            if grace <= DRAIN_GRACE_S + DRAIN_TIMEOUT_S + pre_stop.get("seconds", 0):
                problem(where, f"terminationGracePeriodSeconds {grace} leaves no time to drain")


# --- the pod, started as the kubelet would start it -------------------------------------------
#
# The kubelet writes a Secret volume with its atomic writer and then, when the pod has an
# fsGroup, hands it to that group (Kubernetes' pkg/volume/secret and pkg/volume/volume_linux.go;
# the API's SecretVolumeSource.defaultMode: "Defaults to 0644 ... This might be in conflict
# with other options that affect the file mode, like fsGroup, and the result can be other mode
# bits set"):
# * the volume is a tmpfs (an emptyDir of medium Memory) whose root is 1777, root's;
# * the data is in a hidden timestamped directory `..YYYY_MM_DD_HH_MM_SS.N` (0755), each key a
#   file of mode `items[].mode` or `defaultMode` (0644 when unset), owned by root;
# * `..data` is a symlink to that directory, and each key a symlink `KEY -> ..data/KEY`;
# * with fsGroup, every file and directory (not the symlinks) gets group fsGroup and the mode
#   bits 0440 added (a Secret volume is read-only), directories also setgid and 0110.
# The container's process runs as runAsUser and runAsGroup, with fsGroup and
# supplementalGroups as its supplementary groups.

SECRET_DIR_MODE = 0o1777
TIMESTAMP_DIR_MODE = 0o755
DEFAULT_MODE = 0o644
RO_MASK = 0o440
EXEC_MASK = 0o110

# The Secrets the manifest's header tells the operator to create, as fixtures: what each key
# holds (made in `work`): a token, a self-signed certificate and key, the PostgreSQL URL.
def secret_fixtures(work, pg_url):
    token = base64.b64encode(os.urandom(32)).decode() + "\n"
    key, crt = os.path.join(work, "tls.key"), os.path.join(work, "tls.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "30", "-subj",
                    "/CN=monoflake.default.svc", "-keyout", key, "-out", crt],
                   check=True, capture_output=True)
    return {
        "monoflake-token": {"token": token.encode()},
        "monoflake-tls": {"tls.crt": open(crt, "rb").read(), "tls.key": open(key, "rb").read()},
        "monoflake-pg": {"url": (pg_url + "\n").encode()},
    }


def render_secret(root, source, data, fs_group):
    """Writes one Secret volume into `root` as the kubelet does; returns its listing."""
    os.mkdir(root)
    os.chmod(root, SECRET_DIR_MODE)
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime()) + str(os.getpid())
    ts = os.path.join(root, stamp)
    os.mkdir(ts)
    os.chmod(ts, TIMESTAMP_DIR_MODE)
    default_mode = source.get("defaultMode", DEFAULT_MODE)
    items = source.get("items") or [{"key": k, "path": k} for k in sorted(data)]
    for item in items:
        if item["key"] not in data:
            raise SystemExit(f"secret {source['secretName']} has no key {item['key']}")
        path = os.path.join(ts, item["path"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data[item["key"]])
        os.chmod(path, item.get("mode", default_mode))
    os.symlink(stamp, os.path.join(root, "..data"))
    for top in sorted({item["path"].split("/")[0] for item in items}):
        os.symlink(os.path.join("..data", top), os.path.join(root, top))
    if fs_group is not None:
        entries = [root]
        for where, dirs, files in os.walk(root):
            entries += [os.path.join(where, name) for name in dirs + files]
        for path in entries:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                continue
            mask = RO_MASK | (stat.S_ISGID | EXEC_MASK if stat.S_ISDIR(st.st_mode) else 0)
            os.chown(path, st.st_uid, fs_group)
            os.chmod(path, stat.S_IMODE(st.st_mode) | mask)
    listing = [describe(root, ".")]
    for where, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            listing.append(describe(root, os.path.relpath(os.path.join(where, name), root)))
    return listing


def passable_dirs(base, rel):
    """Makes each directory of `rel` under `base`, mode 0755 (as a container's own are)."""
    path = base
    for part in rel.strip("/").split("/"):
        path = os.path.join(path, part)
        if not os.path.isdir(path):
            os.mkdir(path)
        os.chmod(path, 0o755)
    return path


def describe(root, rel):
    path = os.path.normpath(os.path.join(root, rel))
    st = os.lstat(path)
    line = f"{stat.filemode(st.st_mode)} {st.st_uid}:{st.st_gid} {rel}"
    if stat.S_ISLNK(st.st_mode):
        line += " -> " + os.readlink(path)
    return line


def image(path):
    """The last stage of the Dockerfile: its ENV, ENTRYPOINT, CMD, HEALTHCHECK, USER."""
    text = open(path).read().replace("\\\n", " ")
    stage = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            stage = []
        stage.append((word.upper(), rest.strip()))
    env = {}
    for word, rest in stage:
        if word == "ENV":
            for pair in shlex.split(rest):
                name, _, value = pair.partition("=")
                env[name] = value
    last = lambda w: [rest for word, rest in stage if word == w][-1:]  # noqa: E731
    entry = [json.loads(r) for r in last("ENTRYPOINT")]
    cmd = [json.loads(r) for r in last("CMD")]
    check = last("HEALTHCHECK")
    health = None
    if check:
        options, _, command = check[0].partition("CMD")
        health = {"options": options.split(), "cmd": json.loads(command.strip())}
    copied = [rest.split()[-1] for word, rest in stage if word == "COPY" and "--from=" in rest]
    return {"env": env, "entrypoint": entry[0] if entry else [], "cmd": cmd[0] if cmd else [],
            "healthcheck": health, "binary": copied[-1] if copied else None}




def get(scheme, port, path, timeout=2):
    """An HTTP(S) GET as the kubelet's probe makes it (no certificate check)."""
    if scheme == "HTTPS":
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout,
                                           context=ssl._create_unverified_context())
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode(errors="replace").strip()
    finally:
        conn.close()


def pod(binary, manifest_path, dockerfile_path, pg_url):
    """Starts the manifest's pod on this machine as the kubelet would, and probes it."""
    with open(manifest_path) as f:
        documents = [d for d in yaml.safe_load_all(f) if d]
    workloads = [d for d in documents if d.get("kind") in ("StatefulSet", "Deployment")]
    if len(workloads) != 1:
        problem(manifest_path, f"the pod check needs one workload, found {len(workloads)}")
        return
    w = workloads[0]
    where = f"{manifest_path}: {w['kind']}/{w['metadata']['name']}"
    spec = w["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    psc, csc = spec.get("securityContext", {}), c.get("securityContext", {})
    uid = csc.get("runAsUser", psc.get("runAsUser"))
    gid = csc.get("runAsGroup", psc.get("runAsGroup"))
    fs_group = psc.get("fsGroup")
    groups = ([fs_group] if fs_group is not None else []) + psc.get("supplementalGroups", [])
    img = image(dockerfile_path)
    if uid is None or gid is None:
        problem(where, "runAsUser and runAsGroup are needed to know whom the pod runs as")
        return
    if psc.get("runAsNonRoot") and uid == 0:
        problem(where, "runAsNonRoot with runAsUser 0")
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    work = tempfile.mkdtemp(prefix="monoflake-pod-")
    # The path to the volumes must be passable for the pod's user, as a container's mount
    # points are; mkdtemp makes it root's alone.
    os.chmod(work, 0o755)
    server = None
    database = None
    try:
        if pg_url:
            database = f"monoflake_deploy_check_{os.getpid()}"
            subprocess.run(["psql", pg_url, "-X", "-q", "-c", f"CREATE DATABASE {database}"],
                           check=True, capture_output=True)
            pg_url = urllib.parse.urlsplit(pg_url)._replace(path="/" + database).geturl()
        fixtures = secret_fixtures(work, pg_url or "postgres://unset/")
        root = passable_dirs(work, "rootfs")
        mounts = {}
        print(f"pod check: {where}, container {c['name']}: uid {uid}, gid {gid}, "
              f"supplementary groups {groups or 'none'}, root file system "
              f"{'read-only' if csc.get('readOnlyRootFilesystem') else 'writable'}")
        for vm in c.get("volumeMounts", []):
            if "subPath" in vm:
                problem(where, f"volumeMount {vm['name']}: subPath is not rendered by this check")
                continue
            v = volumes[vm["name"]]
            if "secret" not in v:
                problem(where, f"volume {vm['name']}: only Secret volumes are rendered")
                continue
            source = v["secret"]
            data = fixtures.get(source["secretName"])
            if data is None:
                problem(where, f"no fixture for secret {source['secretName']}")
                continue
            parent, _, name = vm["mountPath"].rstrip("/").rpartition("/")
            at = os.path.join(passable_dirs(root, parent), name)
            listing = render_secret(at, source, data, fs_group)
            mounts[vm["mountPath"].rstrip("/")] = at
            print(f"  {vm['mountPath']}: secret {source['secretName']}, defaultMode "
                  f"{oct(source.get('defaultMode', DEFAULT_MODE))}, fsGroup {fs_group}")
            for line in listing:
                print(f"    {line}")
        # The image: the binary where the Dockerfile copies it.
        if not img["binary"]:
            problem(dockerfile_path, "the last stage copies no binary in")
            return
        parent, _, name = img["binary"].rpartition("/")
        local_binary = os.path.join(passable_dirs(root, parent), name)
        shutil.copy(binary, local_binary)
        os.chmod(local_binary, 0o755)

        def in_image(path):
            """A path in the container, as found here."""
            for mount, at in mounts.items():
                if path == mount or path.startswith(mount + "/"):
                    return at + path[len(mount):]
            if path == img["binary"]:
                return local_binary
            return path

        # The container's environment: the image's ENV, then the manifest's env (which wins).
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOME": "/var/lib/monoflake"}
        env.update(img["env"])
        for e in c.get("env", []):
            if "value" not in e:
                problem(where, f"env {e['name']}: only plain values are rendered")
                continue
            env[e["name"]] = e["value"]
        # The container's ports, on free loopback ports here (the listeners the image names).
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        local = {number: free_port() for number in ports.values()}
        for name in ("MONOFLAKE_LISTEN", "MONOFLAKE_GRPC_LISTEN"):
            if name in env:
                host, _, port = env[name].rpartition(":")
                if int(port) not in local:
                    problem(where, f"{name}={env[name]} is not a container port")
                    return
                env[name] = f"127.0.0.1:{local[int(port)]}"
        env = {k: in_image(v) for k, v in env.items()}
        argv = [in_image(a) for a in (c.get("command") or img["entrypoint"])
                + (c.get("args") or ([] if c.get("command") else img["cmd"]))]
        as_user = ["setpriv", f"--reuid={uid}", f"--regid={gid}"]
        as_user += [f"--groups={','.join(map(str, groups))}"] if groups else ["--clear-groups"]
        if csc.get("allowPrivilegeEscalation") is False:
            as_user.append("--no-new-privs")
        if "ALL" in csc.get("capabilities", {}).get("drop", []):
            as_user += ["--inh-caps=-all", "--bounding-set=-all"]
        # readOnlyRootFilesystem: the whole file system read-only, in a mount namespace of its
        # own (the pod has no writable volume).
        jail = []
        if csc.get("readOnlyRootFilesystem"):
            jail = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                    'mount -o remount,bind,ro / && exec "$@"', "sh"]
        shown = " ".join(f"{k}={v}" for k, v in sorted(env.items()) if k.startswith("MONOFLAKE"))
        print(f"  start: {' '.join(argv)} with {shown}")
        log = open(os.path.join(work, "serve.log"), "w+")
        started = time.monotonic()
        server = subprocess.Popen(jail + as_user + ["--"] + argv, env=env, stdout=log,
                                  stderr=subprocess.STDOUT)
        # The startup probe's budget: its period times its failure threshold.
        startup = c.get("startupProbe", {})
        budget = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
        probes = [(name, c[name]["httpGet"]) for name in
                  ("startupProbe", "readinessProbe", "livenessProbe") if name in c]
        for name, probe in probes:
            port = probe["port"]
            port = local[ports.get(port, port)]
            scheme = probe.get("scheme", "HTTP")
            while True:
                if server.poll() is not None:
                    log.seek(0)
                    problem(where, f"the pod exited with {server.returncode} before its "
                                   f"{name} passed:\n{log.read()}")
                    return
                try:
                    status, body = get(scheme, port, probe["path"])
                except OSError as e:
                    status, body = None, str(e)
                if status == 200:
                    break
                if time.monotonic() - started > budget:
                    problem(where, f"{name} {scheme} {probe['path']}: {status} {body} after "
                                   f"{budget} s")
                    return
                time.sleep(0.2)
            print(f"  {name}: {scheme} {probe['path']} on {probe['port']} "
                  f"({ports.get(probe['port'], probe['port'])} here {port}): {status} {body} "
                  f"at {time.monotonic() - started:.2f} s")
        # The image's HEALTHCHECK, run as the container's user in the container's environment:
        # the command exists in the binary and finds the server by itself.
        health = img["healthcheck"]
        if health is not None:
            command = [in_image(a) for a in health["cmd"]]
            ran = subprocess.run(as_user + ["--"] + command, env=env, capture_output=True,
                                 text=True, timeout=30)
            print(f"  HEALTHCHECK {' '.join(health['options'])} CMD {health['cmd']}: exit "
                  f"{ran.returncode} {ran.stdout.strip()}{ran.stderr.strip()}")
            if ran.returncode != 0:
                problem(dockerfile_path, f"the HEALTHCHECK command failed: {ran.stderr}")
        # A stop, as the kubelet makes it after the preStop hook: exit 0 within the grace.
        grace = spec.get("terminationGracePeriodSeconds", 30)
        pre_stop = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
        stop = time.monotonic()
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(timeout=grace - pre_stop)
        except subprocess.TimeoutExpired:
            code = None
        log.seek(0)
        said = log.read()
        print(f"  SIGTERM: exit {code} after {time.monotonic() - stop:.2f} s (the grace left "
              f"after preStop: {grace - pre_stop} s)")
        if code != 0 or "released" not in said:
            problem(where, f"SIGTERM: exit {code}, not 0 with the node released:\n{said}")
        server = None
    finally:
        if server is not None:
            server.kill()
            server.wait()
        if database:
            subprocess.run(["psql", os.environ["MONOFLAKE_TEST_PG"], "-X", "-q", "-c",
                            f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"],
                           capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binary")
    parser.add_argument("--manifest", default="deploy/kubernetes/monoflake.yaml")
    parser.add_argument("--dockerfile", default="deploy/docker/Dockerfile")
    parser.add_argument("--pod-only", action="store_true",
                        help="only start the manifest's pod (no text checks)")
    args = parser.parse_args()
    binary = os.path.realpath(args.binary)
    if not args.pod_only:
        flags, variables = serve_help(binary)
        with open("cli/src/serve/openapi.json") as f:
            routes = set(json.load(f)["paths"])
        exposed = dockerfile(args.dockerfile, flags, variables)
        unit("deploy/systemd/monoflake.service", flags, variables)
        manifests(args.manifest, flags, variables, routes, exposed)
    pg_url = os.environ.get("MONOFLAKE_TEST_PG")
    if os.geteuid() != 0:
        problem(args.manifest, "the pod check runs as root (it writes root's files and "
                               "starts the pod as its user)")
    elif not pg_url:
        problem(args.manifest, "the pod check needs $MONOFLAKE_TEST_PG (as .ci/run sets it): "
                               "the pod's leases are in PostgreSQL")
    else:
        pod(binary, args.manifest, args.dockerfile, pg_url)
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print("deploy/: the Dockerfile, the systemd unit and the Kubernetes manifests name only "
          "what monoflake serve has, and the manifest's pod starts as its user")


if __name__ == "__main__":
    main()
