#!/usr/bin/env bash
# After a failed ctest run in FOLDER: one line per failed test that reruns it
# alone, with the property's RC_PARAMS="reproduce=..." when RapidCheck printed
# one, and the ENV the run had (a sanitizer's options).
#   .ci/ctest-reproduce.sh FOLDER [ENV...]
set -u
folder=$1; shift
env_prefix=${*:+env $* }
failed=$folder/Testing/Temporary/LastTestsFailed.log
log=$folder/Testing/Temporary/LastTest.log
if [ ! -s "$failed" ]; then
  echo "reproduce: cd $folder && ${env_prefix}ctest --rerun-failed --output-on-failure"
  exit 0
fi
while IFS=: read -r _ name; do
  [ -n "$name" ] || continue
  # The output of this test in LastTest.log runs from its command line to the
  # next "----" rule; RapidCheck's line there names the failing case.
  rc=$(awk -v t="$name" '
      index($0, "/" t "\"") || $0 ~ ("Test: " t "$") { on = 1 }
      on && /RC_PARAMS="reproduce=/ { match($0, /RC_PARAMS="reproduce=[^"]*"/); print substr($0, RSTART, RLENGTH); exit }
      on && /^Test (Passed|Failed)/ { on = 0 }' "$log" 2>/dev/null)
  echo "reproduce: cd $folder && ${env_prefix}${rc:+$rc }./$name"
done < "$failed"
