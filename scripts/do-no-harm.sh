#!/usr/bin/env bash
# Do no harm: the engine on two memfd tiers of the same host DRAM (nothing
# to gain) against --no-tiering, in alternating runs of the same workload;
# prints per-workload throughput ratios with a 95 % interval (Student's t
# over pairs) and the bytes the engine moved. Usage:
#   scripts/do-no-harm.sh [PAIRS] [TIERVISOR]
set -euo pipefail
pairs=${1:-3}
bin=${2:-target/release/tiervisor}
out=$(mktemp -d)
workloads=(
  "zipf:theta=0.99,phases=2,seconds=3"
  "hotset:phases=2,seconds=3"
  "pmbench:phases=2,seconds=3"
  "stream:phases=2,seconds=3"
)
run() { # workload mode pair
  local args=(run --workload "$1" --vcpus 2 --memory 2G
    --tier name=dram,backend=memfd,size=512M --tier name=cxl,backend=memfd,size=1536M)
  [ "$2" = off ] && args+=(--no-tiering)
  "$bin" "${args[@]}" >"$out/$3.$2.$(echo "$1" | cut -d: -f1).log" 2>&1
}
for w in "${workloads[@]}"; do
  for p in $(seq 1 "$pairs"); do
    # Alternate the order so drift over time cancels.
    if [ $((p % 2)) = 1 ]; then order="on off"; else order="off on"; fi
    for m in $order; do
      echo "[do-no-harm] ${w%%:*} pair $p/$pairs engine $m" >&2
      run "$w" "$m" "$p"
    done
  done
done
python3 - "$out" "$pairs" <<'PY'
import glob, math, os, re, statistics, sys
out, pairs = sys.argv[1], int(sys.argv[2])
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}
def mops(path):
    phases = {}
    moved = "-"
    for line in open(path):
        m = re.match(r"\s+(\d+)\s+(\d+)\s+\d+\s+[\d.]+\s+([\d.]+)$", line)
        if m:
            phases[int(m.group(1))] = phases.get(int(m.group(1)), 0.0) + float(m.group(3))
        if line.startswith("tiering:"):
            moved = line.split(" over ")[0][len("tiering: "):]
    return statistics.mean(phases.values()), moved
print("| workload | no-tiering Mops/s | engine Mops/s | engine / no-tiering ± 95 % | engine moved |")
print("|---|---|---|---|---|")
names = sorted({os.path.basename(p).split(".")[2] for p in glob.glob(f"{out}/*.log")})
for w in names:
    ratios, on_all, off_all, moved = [], [], [], []
    for p in range(1, pairs + 1):
        on, mv = mops(f"{out}/{p}.on.{w}.log")
        off, _ = mops(f"{out}/{p}.off.{w}.log")
        ratios.append(on / off); on_all.append(on); off_all.append(off); moved.append(mv)
    mean = statistics.mean(ratios)
    half = T95.get(len(ratios) - 1, 2.0) * statistics.stdev(ratios) / math.sqrt(len(ratios)) if len(ratios) > 1 else float("nan")
    print(f"| {w} | {statistics.mean(off_all):.1f} | {statistics.mean(on_all):.1f} | {mean*100:.1f} % ± {half*100:.1f} % | {'; '.join(moved)} |")
PY
echo "logs: $out" >&2
