#!/usr/bin/env bash
# Flat NCCL allreduce against the hierarchical one (--hierarchical-allreduce) on GPU buffers,
# through the engine, 2 ranks that hvd and NCCL see as two hosts of one rank each (HVD_HOSTNAME
# and NCCL_HOSTID per rank), so the flat NCCL ring runs over NCCL's socket transport on loopback
# and the hierarchical one over hvd's TCP ring. Rounds alternate which goes first.
# Usage: bench/gpu_hierarchical.sh BUILD_DIR OUT_DIR [ROUNDS]
set -euo pipefail
build=${1:?build directory}; out=${2:?output directory}; rounds=${3:-2}
mkdir -p "$out"
fake='export HVD_HOSTNAME=fakehost$HVD_RANK NCCL_HOSTID=fakehost$HVD_RANK HVD_LOCAL_RANK=0 '
fake+='HVD_LOCAL_SIZE=1 HVD_CROSS_RANK=$HVD_RANK HVD_CROSS_SIZE=$HVD_SIZE;'
run() {  # name, extra hvdrun flags...
  local name=$1 round=$2; shift 2
  "$build/apps/hvdrun" -np 2 "$@" -x NCCL_SOCKET_IFNAME=lo sh -c \
    "$fake exec $build/apps/hvd-bench gpu -e 256M -n 10 --json $out/${name}_round$round.json" \
    > "$out/${name}_round$round.log" 2>&1
}
for round in $(seq 1 "$rounds"); do
  if (( round % 2 )); then run flat "$round"; run hierarchical "$round" --hierarchical-allreduce
  else run hierarchical "$round" --hierarchical-allreduce; run flat "$round"; fi
done
echo "results in $out"
