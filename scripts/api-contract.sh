#!/usr/bin/env bash
# Contract test of the operator API: schemathesis (from PyPI) generates
# requests from the committed OpenAPI document (api/openapi.json) and sends
# them to a live `tiervisor serve`; it fails on any 5xx and on any response
# the document does not describe (status, content type, body schema).
#
# Usage: scripts/api-contract.sh
# Called by scripts/test-all.sh after the cargo suites.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --quiet --locked --bin tiervisor --bin tierctl
tiervisor=target/debug/tiervisor
tierctl=target/debug/tierctl
schemathesis_version=4.32.5
venv=target/venv-schemathesis

if [ ! -x "$venv/bin/schemathesis" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check \
        "schemathesis==$schemathesis_version"
fi

work=$(mktemp -d)
server_pid=
cleanup() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
(umask 077 && printf '%s\n' "$token" >"$work/token")
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

"$tiervisor" serve --api-socket "$work/api.sock" \
    --api-tcp "127.0.0.1:$port" --api-token-file "$work/token" \
    >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
    [ -S "$work/api.sock" ] && break
    sleep 0.1
done

# A running VM, so the VM routes answer with more than 404 (schemathesis
# may shut it down, delete it or create others as it goes).
cat >"$work/vm.json" <<'JSON'
{"id": "contract", "vcpus": 1,
 "memory": {"size": 134217728, "tiers": [
   {"name": "fast", "backend": {"kind": "memfd"}, "size": 33554432},
   {"name": "slow", "backend": {"kind": "memfd"}, "size": 134217728}]},
 "payload": {"kind": "workload", "spec": "hotset:size=64M,hot=8M,verify=1,phases=1,seconds=600"},
 "tiering": {"fast_quota": {"max_bytes": 33554432}}}
JSON
"$tierctl" --api-socket "$work/api.sock" create "$work/vm.json"
"$tierctl" --api-socket "$work/api.sock" boot

status=0
contract() {
    "$venv/bin/schemathesis" run api/openapi.json \
        --url "http://127.0.0.1:$port" \
        --header "Authorization: Bearer $token" \
        --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
        --phases examples,coverage,fuzzing \
        --max-examples 40 --seed 1 --workers 1 \
        --generation-database none \
        --request-timeout 20 \
        --no-color "$@" || status=$?
}
# First every route that leaves the VM in place, then the ones that end
# it. vmm.shutdown would end the server under test; the cargo API tests
# cover it.
contract --exclude-path-regex 'vmm\.shutdown|vm\.shutdown|vm\.delete'
contract --include-path-regex 'vm\.shutdown|vm\.delete'

if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "error: tiervisor serve died during the contract test" >&2
    status=1
fi
if [ "$status" -ne 0 ]; then
    echo "--- tiervisor serve log ---" >&2
    tail -50 "$work/server.log" >&2
fi
exit "$status"
