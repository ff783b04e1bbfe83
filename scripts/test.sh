#!/usr/bin/env bash
# Sets everything up, builds, and runs the tests (docs/testing.md).
#
#   test.sh          every test: CTest on the Release build; the unit and rank tests again under
#                    ASAN+UBSAN and TSAN, and the fuzzers (scripts/sanitize.sh; HVD_SKIP_SANITIZE=1
#                    leaves them out); the Python API suites under hvdrun with 2 and 3 ranks and
#                    on TensorFlow 2.15; the end-to-end suite, in parallel, then its tests that
#                    need the machine to themselves
#   test.sh --quick  the inner loop: builds what it runs, then the unit and rank tests, the
#                    layers/params/format checks and one Python suite under hvdrun -np 2
#
# Each phase's wall time is printed at the end, also when one fails, and written to
# $build/test-times.tsv. HVD_E2E_WORKERS: the end-to-end suite's parallel workers.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=full
case "${1:-}" in
  "") ;;
  --quick) mode=quick ;;
  *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac
build=${HVD_BUILD_DIR:-$repo/build}
venv=${HVD_VENV:-$HOME/.cache/hvd/venv}
venv_tf215=${HVD_VENV_TF215:-$HOME/.cache/hvd/venv-tf215}
# One worker more than cores covers the tests that wait on timeouts; the suite is CPU-bound, so
# more gain nothing (docs/testing.md has the measurements).
e2e_workers=${HVD_E2E_WORKERS:-$(($(nproc) + 1))}

phases=()
current=""
background_pid=""  # the phase running beside the others, if any (background below)
started=$SECONDS
report() {
  local rc=$? name secs status
  if [ -n "$background_pid" ]; then  # the main line failed: stop the background phase too
    kill -- "-$background_pid" 2>/dev/null || true
    phases+=("$background_name	$((SECONDS - background_start))	STOPPED")
  fi
  [ -n "$current" ] && phases+=("$current	$((SECONDS - phase_start))	FAILED")
  if [ ${#phases[@]} -gt 0 ]; then
    echo
    echo "test: wall time per phase (seconds)"
    local line
    for line in "${phases[@]}" "total	$((SECONDS - started))"; do
      IFS=$'\t' read -r name secs status <<<"$line"
      printf '  %-68s %5s %s\n' "$name" "$secs" "${status:-}"
    done
    mkdir -p "$build" && printf '%s\n' "${phases[@]}" "total	$((SECONDS - started))" \
      >"$build/test-times.tsv"
  fi
  exit $rc
}
trap report EXIT

# phase NAME COMMAND...: runs one phase and records its wall time.
phase() {
  current=$1
  phase_start=$SECONDS
  shift
  echo "test: $current"
  "$@"
  phases+=("$current	$((SECONDS - phase_start))")
  current=""
}

# background NAME LOG COMMAND...: starts one phase beside the next ones (in a process group of
# its own, so that a failure elsewhere stops all of it), its output in LOG; await_background
# waits for it and fails the run, showing the log's tail, when it failed.
background() {
  background_name=$1 background_log=$2 background_start=$SECONDS
  shift 2
  echo "test: $background_name, in the background (output in $background_log)"
  mkdir -p "$(dirname "$background_log")"
  setsid "$@" >"$background_log" 2>&1 &
  background_pid=$!
}
await_background() {
  local rc=0
  echo "test: waiting for $background_name"
  wait "$background_pid" || rc=$?
  background_pid=""
  if [ $rc -ne 0 ]; then
    tail -n 80 "$background_log"
    echo "test: $background_name failed (exit code $rc); its output: $background_log" >&2
    phases+=("$background_name	$((SECONDS - background_start))	FAILED")
    exit $rc
  fi
  tail -n 1 "$background_log"
  phases+=("$background_name (beside the phases above)	$((SECONDS - background_start))")
}

# pytest under hvdrun: NP ranks of PYTHON each run pytest with ARGS.
ranks_pytest() {
  local np=$1 python=$2
  shift 2
  timeout 600 "$build/apps/hvdrun" -np "$np" -x HVD_OP_TIMEOUT=60 -x TF_CPP_MIN_LOG_LEVEL=2 \
    "$python" -m pytest -x -q -p no:cacheprovider "$@"
}

ctest_run() { (cd "$build" && ctest --output-on-failure --timeout 300 -j "$(nproc)" "$@"); }

phase setup "$repo/scripts/setup.sh"
if [ "$mode" = quick ]; then
  phase build "$repo/scripts/build.sh" unit_tests rank_tests hvdrun _core
  phase "ctest: unit, ranks, layers, params, format" \
    ctest_run -L '^(unit|ranks|checks)$'
  phase "test/python under hvdrun -np 2" ranks_pytest 2 "$venv/bin/python" "$repo/test/python"
  exit 0
fi

phase build "$repo/scripts/build.sh"
# The sanitizer builds and tests run beside CTest and the Python API suites, whose ranks leave
# the cores idle part of the time (waiting on each other); the end-to-end suite, which keeps
# both cores busy, starts after them.
if [ "${HVD_SKIP_SANITIZE:-0}" != 1 ]; then
  background "sanitizers and fuzzers" "$build/sanitize.log" \
    env HVD_BUILD_DIR="$build" "$repo/scripts/sanitize.sh"
fi
# The [alone] tests count the scheduler's doings: they wait until the sanitizers are done.
phase "ctest: every label but alone" ctest_run -LE '^alone$'
for np in 2 3; do
  phase "test/python under hvdrun -np $np" ranks_pytest "$np" "$venv/bin/python" "$repo/test/python"
done
# In processes of their own: see test/python/conftest.py. At 3 ranks only the tests whose path
# depends on the number of ranks run again; on TensorFlow 2.15 (Keras 2) all of them.
phase "test/python/tensorflow under hvdrun -np 2" \
  ranks_pytest 2 "$venv/bin/python" "$repo/test/python/tensorflow"
phase "test/python/tensorflow under hvdrun -np 3, size-dependent tests" \
  ranks_pytest 3 "$venv/bin/python" "$repo/test/python/tensorflow" -m size_dependent
phase "test/python/tensorflow under hvdrun -np 2, TensorFlow 2.15 with Keras 2" \
  ranks_pytest 2 "$venv_tf215/bin/python" "$repo/test/python/tensorflow"

[ -z "$background_pid" ] || await_background
phase "ctest: [alone] tests, with the machine to themselves" ctest_run -L '^alone$'

e2e() {
  HVD_BUILD_DIR="$build" HVD_TF215_PYTHON="$venv_tf215/bin/python" \
    "$venv/bin/python" -m pytest "$repo/test/e2e" -q -p no:cacheprovider --durations=15 "$@"
}
phase "test/e2e, $e2e_workers workers" e2e -n "$e2e_workers" --dist loadgroup -m "not whole_machine"
phase "test/e2e, tests that need the machine to themselves" e2e -m whole_machine
