#!/usr/bin/env bash
# The exit-status gate of gpu-check.sh and gpu-sanitize.sh: reads their summary lines on stdin
# and succeeds (status 0) when one says something failed or did not run. "0 tests failed", in
# CMake 3's green CTest summary, is not a failure (it failed such runs once; CMake 4 leaves the
# count out); "No tests were found" and a sanitizer run that passed zero tests are. Lines about
# the PyTorch baseline are another library's and never fail the run.
summary_says_failed() {
  grep -v '^PyTorch baseline' |
    grep -qE 'FAILED|(^|[^0-9])[1-9][0-9]* tests? failed|none ran|No tests were found|PASSED  \] 0 tests'
}

# Run directly: the gate's own check, for CTest (scripts/lib/summary-gate.sh --self-test).
if [ "${BASH_SOURCE[0]}" = "$0" ] && [ "${1:-}" = --self-test ]; then
  fails=0
  expect() {  # want(failed|ok), line
    local got=ok
    printf '%s\n' "$2" | summary_says_failed && got=failed
    [ "$got" = "$1" ] || { echo "gate: '$2' read as $got, expected $1"; fails=1; }
  }
  expect ok 'tests (unit|gpu): 100% tests passed, 0 tests failed out of 830; skipped: 26'
  expect ok 'tests (unit|gpu): 100% tests passed out of 852; skipped: 29'
  expect ok 'conformance: 100% tests passed, 0 tests failed out of 380; skipped: 23'
  expect ok 'asan cuda_gpu_test: clean ([  PASSED  ] 41 tests, 0 skipped)'
  expect ok 'PyTorch baseline: FAILED to build'
  expect failed 'tests (unit|gpu): 99% tests passed, 1 tests failed out of 830; skipped: 26'
  expect failed 'conformance: 90% tests passed, 38 tests failed out of 380; skipped: 0'
  expect failed 'conformance: No tests were found!!!; skipped: 0'
  expect failed 'tests (unit|gpu): none ran; skipped: 0'
  expect failed 'tsan cuda_wait_test: FAILED (rc 66, see tsan-cuda_wait_test.log)'
  expect failed 'asan nothing: clean ([  PASSED  ] 0 tests, 0 skipped)'
  expect failed 'full build FAILED (see build.log)'
  [ "$fails" = 0 ] && echo "summary gate: all cases read right"
  exit "$fails"
fi
