#!/usr/bin/env bash
# Runs, in one run on this machine, the same allreduce sweep (float32 sum, out of place) through
# hvd-bench, OpenMPI's MPI_Allreduce (Debian's openmpi) and Gloo (Debian's libgloo-dev,
# gloo::allreduce as torch.distributed calls it; TCP only), interleaved for ROUNDS rounds; then
# prints median times per size and hvd's speed ratio against each peer. TRANSPORT=tcp (the
# default) runs hvd over TCP and OpenMPI over TCP with shared memory excluded; TRANSPORT=shm runs
# both over shared memory (hvd --transport shm, OpenMPI's vader BTL), writing compare_peers_shm*.
# Sizes up to 64 KiB take 100 warm-up and 1000 timed runs (20 runs of a 10 us operation are a
# 200 us window that one scheduler hiccup on a shared machine spoils); larger sizes take 5 and
# ITERS. Every tool gets exactly the same arguments. With 2 ranks hvd is calibrated first
# (hvd-bench calibrate over the transport, saved as this host's model), as a user would.
# Sizes to 64 KiB run SMALL_REPEATS times a round for hvd and OpenMPI (once for Gloo).
#   bench/compare_peers.sh [ROUNDS]  (env: NP=2, MAX=256M, ITERS=20, SMALL_REPEATS=3,
#                                     OUT=bench/results, TRANSPORT=tcp)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-3}
np=${NP:-2}
max=${MAX:-268435456}
iters=${ITERS:-20}
small_repeats=${SMALL_REPEATS:-3}
out=${OUT:-$repo/bench/results}
transport=${TRANSPORT:-tcp}
case $transport in
  tcp) mpi_btl=tcp,self; mpi_label=openmpi-tcp; name=compare_peers ;;
  shm) mpi_btl=vader,self; mpi_label=openmpi-shm; name=compare_peers_shm ;;
  *) echo "compare_peers: TRANSPORT must be tcp or shm, not '$transport'" >&2; exit 2 ;;
esac
build=${HVD_BUILD_DIR:-$repo/build}
peers=$build/bench-peers

need=()
for p in libopenmpi-dev openmpi-bin libgloo-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "compare_peers: installing ${need[*]}"
  sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
"$repo/scripts/build.sh" >/dev/null
# hvd as its docs tell a user to run it on a new machine: calibrated once (hvd-bench calibrate),
# so this host's measured table picks the allreduce algorithm by size over this transport.
if [ "$np" -eq 2 ]; then
  "$build/apps/hvdrun" -np 2 --transport "$transport" "$build/apps/hvd-bench" calibrate \
      | sed -n 's/^\[0\]<stdout>:# saved to /compare_peers: calibrated, saved to /p'
fi
mkdir -p "$peers" "$out"
mpicxx -O3 -std=c++17 "$repo/bench/peers/mpi_allreduce.cc" -o "$peers/mpi_allreduce"
g++ -O3 -std=c++17 "$repo/bench/peers/gloo_allreduce.cc" -o "$peers/gloo_allreduce" -lgloo -pthread

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
raw=$out/${name}_raw.jsonl
: >"$raw"
small=(-b 4 -e 65536 -f 4 -w 100 -n 1000)
large=(-b 262144 -e "$max" -f 4 -w 5 -n "$iters")
run_hvd() {
  "$build/apps/hvdrun" -np "$np" --transport "$transport" "$build/apps/hvd-bench" "$@" -c 0 \
      --json "$out/hvd_round$round.json" >/dev/null
  python3 - "$out/hvd_round$round.json" >>"$raw" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
for row in report["rows"]:
    oop = row["out_of_place"]
    print(json.dumps({"tool": "hvd", "ranks": report["ranks"], "size": row["size"],
                      "time_us": oop["time_us"], "busbw_gbps": oop["busbw_gbps"]}))
PY
}
run_mpi() {
  timeout 900 mpirun --oversubscribe -np "$np" --mca btl "$mpi_btl" --mca btl_tcp_if_include lo \
      --mca pml ob1 "$peers/mpi_allreduce" "$@" | sed "s/\"openmpi-tcp\"/\"$mpi_label\"/" >>"$raw"
}
run_gloo() {
  local store
  store=$(mktemp -d)
  "$build/apps/hvdrun" -np "$np" "$peers/gloo_allreduce" "$store" "$@" \
      | sed 's/^\[0\]<stdout>://' >>"$raw"
  rm -rf "$store"
}
# The tools take turns going first (round r starts with tool r mod 3), so none of them always
# runs right after the same neighbour: on a shared machine, what ran just before matters.
tools=(run_hvd run_mpi run_gloo)
for round in $(seq 1 "$rounds"); do
  echo "compare_peers: round $round/$rounds" >&2
  for sweep in small large; do
    declare -n args=$sweep
    for k in 0 1 2; do
      "${tools[$(( (round - 1 + k) % 3 ))]}" "${args[@]}"
    done
    unset -n args
  done
  # Small sizes last a second or two per tool, shorter than the machine's slow spells: hvd and
  # OpenMPI (Gloo, 100x slower there, is never the closest) take SMALL_REPEATS - 1 more turns.
  for repeat in $(seq 2 "$small_repeats"); do
    if (( (round + repeat) % 2 )); then run_hvd "${small[@]}"; run_mpi "${small[@]}"
    else run_mpi "${small[@]}"; run_hvd "${small[@]}"; fi
  done
done
python3 "$repo/bench/summarize_peers.py" "$raw" "$out/$name.json" "$out/$name.md"
