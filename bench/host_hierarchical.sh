#!/usr/bin/env bash
# A flat collective against the hierarchical one (--hierarchical-allreduce or
# --hierarchical-allgather, by OP) on host memory,
# hvd-bench's direct sweep, 4 ranks that hvd sees as two hosts of two (HVD_HOSTNAME and the
# local/cross placement per rank). Flat: one TCP ring of 4 (ranks of a job on several hosts
# link over TCP). Hierarchical: shared memory between the two ranks of each "host", TCP across.
# Rounds alternate which goes first; prints the median time per size and the ratio.
# Usage: bench/host_hierarchical.sh BUILD_DIR OUT_DIR [ROUNDS] [OP: allreduce|allgather]
set -euo pipefail
build=${1:?build directory}; out=${2:?output directory}; rounds=${3:-3}; op=${4:-allreduce}
case $op in
  allreduce|allgather) flag=--hierarchical-$op ;;
  *) echo "OP must be allreduce or allgather, not '$op'" >&2; exit 2 ;;
esac
mkdir -p "$out"
fake='export HVD_HOSTNAME=fakehost$((HVD_RANK / 2)) HVD_LOCAL_RANK=$((HVD_RANK % 2)) '
fake+='HVD_LOCAL_SIZE=2 HVD_CROSS_RANK=$((HVD_RANK / 2)) HVD_CROSS_SIZE=2;'
run() {  # name, round, extra hvdrun flags...
  local name=$1 round=$2; shift 2
  "$build/apps/hvdrun" -np 4 "$@" sh -c \
    "$fake exec $build/apps/hvd-bench -b 4 -e 64M -f 4 -o $op -d float32 -w 5 -n 20 \
     --json $out/${name}_round$round.json" > "$out/${name}_round$round.log" 2>&1
}
for round in $(seq 1 "$rounds"); do
  if (( round % 2 )); then run flat "$round"; run hierarchical "$round" "$flag"
  else run hierarchical "$round" "$flag"; run flat "$round"; fi
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
def times(name):
    out = {}
    for f in sorted(glob.glob(f"{sys.argv[1]}/{name}_round*.json")):
        for row in json.load(open(f))["rows"]:
            out.setdefault(row["size"], []).append(row["out_of_place"]["time_us"])
    return out
flat, hier = times("flat"), times("hierarchical")
print("| bytes | flat, TCP ring of 4 (us) | hierarchical (us) | flat / hierarchical |")
print("| --- | --- | --- | --- |")
for size in sorted(flat):
    f, h = statistics.median(flat[size]), statistics.median(hier[size])
    print(f"| {size} | {f:.1f} | {h:.1f} | {f / h:.2f} |")
PY
