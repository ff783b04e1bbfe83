#!/usr/bin/env bash
# Builds the C++ unit and rank tests with clang under AddressSanitizer+UndefinedBehaviorSanitizer
# (with the libFuzzer targets of test/fuzz) and under ThreadSanitizer, runs the tests, then runs
# the fuzzers, one per core side by side, each for a bounded time from its seed corpus
# (test/fuzz/corpus/<name>). Any finding fails the run: the code is built with
# -fno-sanitize-recover and the runtimes halt on error.
# Only what these tests need is built: no Python package, no CUDA, no apps.
#
# Build dirs: $HVD_BUILD_DIR-asan and $HVD_BUILD_DIR-tsan (default build-asan, build-tsan).
# HVD_SANITIZERS picks the parts (default "asan tsan fuzz"); HVD_FUZZ_SECONDS bounds each
# fuzzer (default 20). HVD_TSAN_TESTS and HVD_TSAN_EXCLUDE, CTest regexes, narrow the tests
# run under TSAN (default: every unit and rank test).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=${HVD_BUILD_DIR:-$repo/build}
parts=${HVD_SANITIZERS:-asan tsan fuzz}
fuzz_seconds=${HVD_FUZZ_SECONDS:-20}
tsan_tests=${HVD_TSAN_TESTS:-}
tsan_exclude=${HVD_TSAN_EXCLUDE:-}
jobs=${HVD_SANITIZE_JOBS:-$(nproc)}
cxx=${HVD_SANITIZE_CXX:-clang++}
fuzzers=(frame rendezvous_protocol engine_messages host_spec hostfile ssh_config)

has() { [[ " $parts " == *" $1 "* ]]; }
# ccache keys relative to the checkout (scripts/build.sh): a clone elsewhere hits the same entries.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$repo} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}

# configure DIR SANITIZERS [extra cmake args...]
configure() {
  local dir=$1 sanitize=$2
  shift 2
  local launcher_args=()
  if [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] && command -v ccache >/dev/null; then
    launcher_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  # -O1 keeps the tests fast enough and the stacks readable; line tables are enough for
  # symbolized reports and much cheaper to compile than full -g.
  cmake -S "$repo" -B "$dir" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" -DHVD_SANITIZE="$sanitize" \
    -DHVD_WITH_PYTHON=OFF -DHVD_WITH_NCCL=OFF "${launcher_args[@]}" "$@" >/dev/null
}

# run_tests DIR [ctest args...]: the unit and rank tests, in parallel, each under a timeout.
run_tests() {
  local dir=$1
  shift
  (cd "$dir" && ctest --output-on-failure --timeout 300 -j "$jobs" "$@")
}

# The sanitizer runtimes' options: stop at the first report with a non-zero exit.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$repo/test/tsan-suppressions.txt"
# Tests scale their timeouts and deadlines by this (test/ranks/test_time.h): sanitized code runs
# several times slower.
export HVD_TEST_TIME_SCALE=${HVD_TEST_TIME_SCALE:-4}

if has asan || has fuzz; then
  configure "$prefix-asan" address,undefined -DHVD_BUILD_FUZZERS="$(has fuzz && echo ON || echo OFF)"
  targets=()
  has asan && targets+=(unit_tests rank_tests)
  has fuzz && targets+=("${fuzzers[@]/%/_fuzzer}")
  echo "sanitize: building ${targets[*]} with ASAN+UBSAN in $prefix-asan"
  cmake --build "$prefix-asan" -j "$jobs" --target "${targets[@]}"
fi
if has asan; then
  echo "sanitize: unit and rank tests under ASAN+UBSAN"
  run_tests "$prefix-asan"
fi

if has tsan; then
  configure "$prefix-tsan" thread
  echo "sanitize: building unit_tests rank_tests with TSAN in $prefix-tsan"
  cmake --build "$prefix-tsan" -j "$jobs" --target unit_tests rank_tests
  echo "sanitize: unit and rank tests under TSAN${tsan_tests:+ matching '$tsan_tests'}${tsan_exclude:+, except '$tsan_exclude'}"
  filters=()
  [ -n "$tsan_tests" ] && filters+=(-R "$tsan_tests")
  [ -n "$tsan_exclude" ] && filters+=(-E "$tsan_exclude")
  run_tests "$prefix-tsan" "${filters[@]}"
fi

# fuzz NAME: one fuzzer from its committed corpus (read only: new inputs go to a scratch dir)
# for fuzz_seconds; a crash, leak, timeout or sanitizer report fails it and leaves the input in
# $prefix-asan/fuzz-artifacts. Prints its summary, or the log's tail when it failed.
fuzz() {
  local name=$1 scratch rc=0
  scratch=$(mktemp -d)
  "$prefix-asan/test/fuzz/${name}_fuzzer" "$scratch" "$repo/test/fuzz/corpus/$name" \
    -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    -artifact_prefix="$artifacts/${name}-" -print_final_stats=1 2>"$scratch.log" || rc=$?
  if [ $rc -ne 0 ]; then
    tail -n 60 "$scratch.log"
    echo "sanitize: the $name fuzzer failed; its input is in $artifacts" >&2
  else
    echo "sanitize: $name: $(grep -E '^stat::(number_of_executed_units|new_units_added)' \
      "$scratch.log" | tr '\n' ' ')"
  fi
  rm -rf "$scratch" "$scratch.log"
  return $rc
}

if has fuzz; then
  # The fuzzers run side by side, one per core, each for fuzz_seconds of its own core.
  artifacts="$prefix-asan/fuzz-artifacts"
  mkdir -p "$artifacts"
  echo "sanitize: fuzzing ${fuzzers[*]}, ${fuzz_seconds}s each, $jobs at a time"
  failed=0
  running=0
  reap_one() {  # waits for one fuzzer to end
    wait -n || failed=1
    running=$((running - 1))
  }
  for name in "${fuzzers[@]}"; do
    [ $running -lt "$jobs" ] || reap_one
    fuzz "$name" &
    running=$((running + 1))
  done
  while [ $running -gt 0 ]; do reap_one; done
  [ $failed -eq 0 ] || exit 1
fi
echo "sanitize: ok ($parts)"
