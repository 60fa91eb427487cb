#!/usr/bin/env bash
# Monitoring test with the real Prometheus: runs Debian's `prometheus`
# package (fetched with apt-get download, never installed) on
# deploy/prometheus/tiervisor.yml, with only its target, token path and
# interval replaced, against a live `tiervisor serve` on TCP with a bearer
# token and a running VM, and reads the tiervisor series back through
# Prometheus's query API, checking them against what the API says. The
# same target scraped with a wrong token and with none must be down (401)
# and yield no tiervisor series. promtool checks the deploy file and the
# test's configuration first.
#
# The package is unpacked (dpkg-deb -x) into
# target/prometheus/prometheus_VERSION/ and reused while apt's candidate
# version stays the same; with no apt answer at all the newest unpacked
# one is used.
#
# Usage: scripts/prometheus-check.sh
# Called by scripts/test-all.sh after the API contract test.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --quiet --locked --bin tiervisor
tiervisor=target/debug/tiervisor
deploy_config=deploy/prometheus/tiervisor.yml
cache=$PWD/target/prometheus
# Every wait below (server up, Prometheus ready, a series scraped) is
# bounded by this; only a hang reaches it.
deadline_s=60

log() { printf 'prometheus-check: %s\n' "$*"; }
die() {
    log "FAIL: $*"
    exit 1
}

# --- Prometheus, from Debian's package ----------------------------------

for tool in apt-get apt-cache dpkg-deb python3; do
    command -v "$tool" >/dev/null || die "$tool not found: this needs a Debian (or derived) host"
done

candidate() {
    apt-cache show --no-all-versions prometheus 2>/dev/null |
        sed -n 's/^Version: //p' | head -n1 || true
}

# Downloads and unpacks VERSION into DIR, through a temporary directory so
# that an interrupted run leaves nothing half unpacked.
fetch() {
    local version=$1 dir=$2 tmp status=0
    tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
    if (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "prometheus=$version" >&2) &&
        dpkg-deb -x "$tmp"/*.deb "$tmp/root" &&
        [ -x "$tmp/root/usr/bin/prometheus" ] && [ -x "$tmp/root/usr/bin/promtool" ]; then
        rm -rf "$dir"
        mv "$tmp/root" "$dir"
    else
        status=1
    fi
    rm -rf "$tmp"
    return "$status"
}

mkdir -p "$cache"
version=$(candidate)
if [ -z "$version" ]; then
    log "apt does not know prometheus; running apt-get update"
    apt-get update -qq >&2 || log "warning: apt-get update failed"
    version=$(candidate)
fi
if [ -n "$version" ]; then
    dir=$cache/prometheus_${version//:/%3a}
    if [ ! -x "$dir/usr/bin/prometheus" ]; then
        log "fetching prometheus $version (apt-get download, not installed)"
        if ! fetch "$version" "$dir"; then
            # Stale lists name a version the mirror no longer has.
            log "download failed; running apt-get update and retrying"
            apt-get update -qq >&2 || true
            version=$(candidate)
            [ -n "$version" ] || die "apt cannot find prometheus after apt-get update"
            dir=$cache/prometheus_${version//:/%3a}
            fetch "$version" "$dir" || die "cannot download or unpack prometheus $version"
        fi
    fi
else
    dir=$(find "$cache" -mindepth 1 -maxdepth 1 -type d -name 'prometheus_*' | sort -V | tail -n1)
    if [ -z "$dir" ] || [ ! -x "$dir/usr/bin/prometheus" ]; then
        die "apt cannot find prometheus (is Debian bookworm main in /etc/apt/sources.list?)"
    fi
    log "warning: apt cannot resolve prometheus; using the cached $dir"
fi
prometheus=$dir/usr/bin/prometheus
promtool=$dir/usr/bin/promtool
log "$("$prometheus" --version 2>&1 | head -n1)"

# --- the test's files ------------------------------------------------------

work=$(mktemp -d)
server_pid=
prometheus_pid=
status=1
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    local pid
    for pid in $prometheus_pid $server_pid; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [ "$status" -ne 0 ]; then
        if [ -s "$work/server.log" ]; then
            echo "--- tiervisor serve log (last 20 lines) ---"
            tail -n 20 "$work/server.log"
        fi
        if [ -s "$work/prometheus.log" ]; then
            echo "--- prometheus log: warnings and errors (last 20) ---"
            grep -E 'level=(warn|error)' "$work/prometheus.log" | tail -n 20 || true
        fi
        log "FAIL (see the FAIL lines above)"
    fi
    rm -rf "$work"
}
trap cleanup EXIT

token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
(umask 077 && printf '%s\n' "$token" >"$work/api.token" &&
    printf 'not-%s\n' "$token" >"$work/wrong.token")
# Two free loopback ports, both held while the kernel picks them.
read -r tv_port prom_port < <(python3 -c '
import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')

# The deploy file itself, with the test's target, token and interval.
sed -e "s#127\.0\.0\.1:8080#127.0.0.1:$tv_port#" \
    -e "s#/etc/tiervisor/api\.token#$work/api.token#" \
    -e 's#scrape_interval: 15s#scrape_interval: 1s#' \
    "$deploy_config" >"$work/prometheus.yml"
for want in "job_name: tiervisor" "127.0.0.1:$tv_port" "credentials_file: $work/api.token" \
    "scrape_interval: 1s" "metrics_path: /metrics" "type: Bearer"; do
    grep -qF -- "$want" "$work/prometheus.yml" ||
        die "$deploy_config changed: the test cannot find '$want' in it after substitution"
done
# The same target with a wrong token and with none: both must be refused.
cat >>"$work/prometheus.yml" <<EOF
  # Added by scripts/prometheus-check.sh: these two must be refused.
  - job_name: tiervisor-wrong-token
    scrape_interval: 1s
    authorization:
      type: Bearer
      credentials_file: $work/wrong.token
    static_configs:
      - targets: ["127.0.0.1:$tv_port"]
  - job_name: tiervisor-no-token
    scrape_interval: 1s
    static_configs:
      - targets: ["127.0.0.1:$tv_port"]
EOF

# The token file exists only on a deployed host: the deploy file gets the
# syntax check, the test's file the full one (files included).
"$promtool" check config --syntax-only "$deploy_config" ||
    die "promtool rejects $deploy_config"
"$promtool" check config "$work/prometheus.yml" ||
    die "promtool rejects the test's configuration (from $deploy_config)"
log "PASS: promtool check config ($deploy_config, and the test's copy)"

# --- tiervisor serve and Prometheus ---------------------------------------

"$tiervisor" serve --api-socket "$work/api.sock" \
    --api-tcp "127.0.0.1:$tv_port" --api-token-file "$work/api.token" \
    --stop-grace 1 >"$work/server.log" 2>&1 &
server_pid=$!
waited=0
until [ -S "$work/api.sock" ]; do
    kill -0 "$server_pid" 2>/dev/null || die "tiervisor serve exited at start"
    [ "$waited" -lt $((deadline_s * 10)) ] || die "tiervisor serve did not open its socket in ${deadline_s}s"
    sleep 0.1
    waited=$((waited + 1))
done
log "tiervisor serve: pid $server_pid, API on $work/api.sock and 127.0.0.1:$tv_port"

"$prometheus" --config.file="$work/prometheus.yml" \
    --storage.tsdb.path="$work/data" \
    --web.listen-address="127.0.0.1:$prom_port" \
    >"$work/prometheus.log" 2>&1 &
prometheus_pid=$!
log "prometheus: pid $prometheus_pid, on 127.0.0.1:$prom_port"

# The checks, over HTTP: the VM through tiervisor's TCP API (with the
# token), the series through Prometheus's query API.
status=0
python3 - "$tv_port" "$prom_port" "$work/api.token" \
    "$("$tiervisor" --version)" "$deadline_s" "$server_pid" "$prometheus_pid" <<'PY' || status=$?
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

tv_port, prom_port, token_file, version_line, deadline_s, server_pid, prom_pid = sys.argv[1:]
deadline_s = float(deadline_s)
token = open(token_file).read().strip()
tv = f"http://127.0.0.1:{tv_port}"
prom = f"http://127.0.0.1:{prom_port}"
version = version_line.split()[-1]
vm_id = "prom-check"
failures = []


def say(line):
    print(f"prometheus-check: {line}", flush=True)


def passed(what):
    say(f"PASS: {what}")


def failed(what):
    say(f"FAIL: {what}")
    failures.append(what)


def alive(pid, name):
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        say(f"FAIL: {name} (pid {pid}) exited")
        sys.exit(1)


def api(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(tv + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as resp:
        text = resp.read()
    return json.loads(text) if text else None


def query(expr):
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=30) as resp:
        answer = json.load(resp)
    if answer.get("status") != "success":
        raise RuntimeError(f"query {expr!r}: {answer}")
    return answer["data"]["result"]


def target_errors():
    with urllib.request.urlopen(f"{prom}/api/v1/targets", timeout=30) as resp:
        targets = json.load(resp)["data"]["activeTargets"]
    return {t["labels"]["job"]: (t["health"], t.get("lastError", "")) for t in targets}


def show(result):
    """A query's result as PromQL-like text: {labels} value, ..."""
    if not result:
        return "no series"
    out = []
    for r in result:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(r["metric"].items())
                          if k not in ("__name__", "job"))
        out.append(f"{{{labels}}} {r['value'][1]}")
    return "; ".join(out)


def wait_for(what, expr, ok):
    """Polls EXPR until OK(result) holds; PASS, or FAIL at the deadline."""
    start = time.monotonic()
    next_progress = start + 5
    result = None
    while True:
        alive(server_pid, "tiervisor serve")
        alive(prom_pid, "prometheus")
        result = query(expr)
        if ok(result):
            passed(f"{what}: {expr} = {show(result)}")
            return result
        now = time.monotonic()
        if now - start > deadline_s:
            failed(f"{what}: {expr} is {show(result)} after {deadline_s:.0f}s")
            return None
        if now >= next_progress:
            say(f"  waiting {now - start:.0f}s: {expr} = {show(result)}")
            next_progress = now + 5
        time.sleep(0.5)


def values(result):
    return [float(r["value"][1]) for r in result]


# A VM with a tiering engine, through the TCP API and its token. An idle
# guest: the series are there without keeping a host core busy.
vm = {
    "id": vm_id, "vcpus": 1,
    "memory": {"size": 128 << 20, "tiers": [
        {"name": "fast", "backend": {"kind": "memfd"}, "size": 32 << 20},
        {"name": "slow", "backend": {"kind": "memfd"}, "size": 128 << 20}]},
    "payload": {"kind": "workload", "spec": "idle:phases=1,seconds=600"},
    "tiering": {"fast_quota": {"max_bytes": 32 << 20}},
}
api("PUT", "/api/v1/vm.create", vm)
api("PUT", "/api/v1/vm.boot")
info = api("GET", "/api/v1/vm.info")
say(f"VM {vm_id} created and booted over TCP: state {info['state']}")

# Prometheus up and answering.
start = time.monotonic()
while True:
    alive(prom_pid, "prometheus")
    try:
        with urllib.request.urlopen(f"{prom}/-/ready", timeout=5) as resp:
            if resp.status == 200:
                break
    except (urllib.error.URLError, ConnectionError):
        pass
    if time.monotonic() - start > deadline_s:
        say(f"FAIL: prometheus not ready after {deadline_s:.0f}s")
        sys.exit(1)
    time.sleep(0.2)
passed(f"prometheus ready after {time.monotonic() - start:.1f}s")

job = 'job="tiervisor"'
up = wait_for("scraped with the token", f"up{{{job}}}",
              lambda r: values(r) == [1.0])
if up is None:
    say(f"  targets: {target_errors()}")
elif up[0]["metric"].get("instance") != f"127.0.0.1:{tv_port}":
    failed(f"up's instance is {up[0]['metric'].get('instance')}, not 127.0.0.1:{tv_port}")

for bad in ("tiervisor-wrong-token", "tiervisor-no-token"):
    if wait_for(f"{bad} refused", f'up{{job="{bad}"}}', lambda r: values(r) == [0.0]):
        health, error = target_errors().get(bad, ("?", "no such target"))
        if "401" in error:
            passed(f"{bad}: Prometheus reports {error!r}")
        else:
            failed(f"{bad}: expected a 401 scrape error, Prometheus reports {health} {error!r}")

# tiervisor's own series, read back through Prometheus.
wait_for("build info", f"tiervisor_build_info{{{job}}}",
         lambda r: len(r) == 1 and r[0]["metric"].get("version") == version
         and values(r) == [1.0])
vm_sel = f'{job},vm="{vm_id}"'
wait_for("VM state as vm.info says", f'tiervisor_vm_state{{{vm_sel},state="{info["state"]}"}}',
         lambda r: values(r) == [1.0])
wait_for("VM memory as vm.info says", f"tiervisor_vm_memory_bytes{{{vm_sel}}}",
         lambda r: values(r) == [float(info["memory_bytes"])])
want_tiers = {t["name"]: float(t["capacity_frames"] * info["frame_size"]) for t in info["tiers"]}
wait_for("tier capacities as vm.info says", f"tiervisor_tier_capacity_bytes{{{vm_sel}}}",
         lambda r: {x["metric"].get("tier"): float(x["value"][1]) for x in r} == want_tiers)
engine = wait_for("engine counters flow", f"tiervisor_engine_intervals_total{{{vm_sel}}}",
                  lambda r: len(r) == 1 and values(r)[0] > 0)
if engine:
    scraped = values(engine)[0]
    intervals = api("GET", "/api/v1/vm.tiering.stats")["intervals"]
    if intervals >= scraped:
        passed(f"engine intervals: {scraped:.0f} scraped, {intervals} in vm.tiering.stats since")
    else:
        failed(f"engine intervals: {scraped:.0f} scraped, but vm.tiering.stats says {intervals}")

refused = query('count({job=~"tiervisor-.*-token", __name__=~"tiervisor_.*"})')
if refused:
    failed(f"refused scrapes stored tiervisor series: {show(refused)}")
else:
    passed("no tiervisor series from the refused scrapes")

if failures:
    say(f"FAIL: {len(failures)} check(s) failed")
    sys.exit(1)
say("PASS: Prometheus scrapes tiervisor serve over TCP with its token")
PY
if ! kill -0 "$server_pid" 2>/dev/null; then
    log "FAIL: tiervisor serve died during the test"
    status=1
fi
exit "$status"
