#!/usr/bin/env bash
# Runs fuzzers built by `make fuzz-build`, one after the other, each for SECONDS:
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
status=0
for what in "$@"; do
  bin="$build/fuzz_$what"
  [ -x "$bin" ] || { echo "fuzz: no $bin (make fuzz-build)"; exit 2; }
  mkdir -p "$build/corpus/$what" "$build/crashes"
  dict=()  # the request fuzzers share HTTP's tokens
  case $what in parser | request) dict=("-dict=fuzz/http.dict") ;; esac
  log="$build/fuzz-$what.log"
  seed=()  # FUZZ_SEED fixes libFuzzer's random choices (make test sets it)
  [ -n "${FUZZ_SEED:-}" ] && seed=("-seed=$FUZZ_SEED")
  "$bin" "$build/corpus/$what" "fuzz/corpus/$what" "${dict[@]}" "${seed[@]}" \
    -max_total_time="$seconds" -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$build/crashes/$what-" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  if [ $rc -eq 0 ]; then
    echo "fuzz_$what: ${runs:-?} runs in ${seconds}s, ${rate:-?}/s, no failure"
  else
    status=1
    echo "fuzz_$what: FAILED (exit $rc); the end of $log:"
    grep -E "fuzz_$what:|ERROR|SUMMARY|^    #[0-9]" "$log" | head -20
    crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    [ -n "$crash" ] && echo "fuzz_$what: replay with: $bin $crash"
  fi
done
exit $status
