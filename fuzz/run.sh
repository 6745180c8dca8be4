#!/usr/bin/env bash
# Runs fuzzers built by `make fuzz-build`, each for SECONDS, FUZZ_JOBS at a
# time (default: the cores, at most 2; a fuzzer is one process on one core):
#   fuzz/run.sh BUILD_DIR SECONDS WHAT...      (WHAT: json, sse, parser, ...)
# Each starts from its seeds, fuzz/corpus/WHAT/ (read, never written), and
# what earlier runs found, BUILD_DIR/corpus/WHAT/ (where new inputs go). A
# crash or a failed check is saved as BUILD_DIR/crashes/WHAT-crash-HASH, the
# command that replays it is printed, and the script exits 1.
set -uo pipefail
cd "$(dirname "$0")/.."
build=$1
seconds=$2
shift 2
cores=$(nproc 2>/dev/null || echo 1)
jobs=${FUZZ_JOBS:-$((cores < 2 ? cores : 2))}

# One fuzzer; its verdict goes to its .out file, printed when it ends.
fuzz_one() {
  local what=$1 bin="$build/fuzz_$1" dict=() seed=() log rc runs rate crash
  case $what in parser | request) dict=("-dict=fuzz/http.dict") ;; esac  # HTTP's tokens
  log="$build/fuzz-$what.log"
  [ -n "${FUZZ_SEED:-}" ] && seed=("-seed=$FUZZ_SEED")  # make test fixes libFuzzer's choices
  "$bin" "$build/corpus/$what" "fuzz/corpus/$what" "${dict[@]}" "${seed[@]}" \
    -max_total_time="$seconds" -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$build/crashes/$what-" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  if [ $rc -eq 0 ]; then
    echo "fuzz_$what: ${runs:-?} runs in ${seconds}s, ${rate:-?}/s, no failure"
  else
    echo "fuzz_$what: FAILED (exit $rc); the end of $log:"
    grep -E "fuzz_$what:|ERROR|SUMMARY|^    #[0-9]" "$log" | head -20
    crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    [ -n "$crash" ] && echo "fuzz_$what: replay with: $bin $crash"
  fi
  return $rc
}

for what in "$@"; do
  [ -x "$build/fuzz_$what" ] || { echo "fuzz: no $build/fuzz_$what (make fuzz-build)"; exit 2; }
  mkdir -p "$build/corpus/$what" "$build/crashes"
done
status=0
running=0
declare -A out=()  # pid -> the file its verdict is in
finish() {  # waits for one fuzzer to end and prints its verdict
  local pid rc=0
  wait -n -p pid || rc=$?
  cat "${out[$pid]}"
  rm -f "${out[$pid]}"
  unset "out[$pid]"
  running=$((running - 1))
  [ $rc -eq 0 ] || status=1
}
for what in "$@"; do
  [ $running -lt "$jobs" ] || finish
  f=$(mktemp)
  fuzz_one "$what" >"$f" 2>&1 &
  out[$!]=$f
  running=$((running + 1))
done
while [ $running -gt 0 ]; do finish; done
exit $status
