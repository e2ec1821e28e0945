#!/usr/bin/env bash
# CUDA compiler launcher: runs the compile command given after the log folder and keeps what ptxas
# printed (-Xptxas -v) in <log-folder>/<object name>.ptxas.log for the resource report and its gate.
# Usage: ptxas-capture.sh LOG_DIR COMPILER ARGS...
set -u
logdir=$1
shift
out=object
prev=
for arg in "$@"; do
  [ "$prev" = "-o" ] && out=$arg
  prev=$arg
done
mkdir -p "$logdir"
log="$logdir/$(basename "$out").ptxas.log"
"$@" 2>"$log.tmp"
rc=$?
# Pass on everything but the routine resource lines, so warnings and errors still show in the build.
grep -v -E '^ptxas info|^    [0-9]+ bytes stack frame' "$log.tmp" >&2
mv "$log.tmp" "$log"
exit $rc
