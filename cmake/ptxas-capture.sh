#!/usr/bin/env bash
# CUDA compiler launcher: runs the compile command given after the log folder and the build folder and
# keeps what ptxas printed (-Xptxas -v) for the resource report and its gate.
# Usage: ptxas-capture.sh LOG_DIR BUILD_DIR COMPILER ARGS...
#
# One log per object, named after the object's path relative to BUILD_DIR with '/' turned into '__'
# (CMakeFiles/evosdpa_objects.dir/src/kernels/mma/inst/x.cu.o ->
#  LOG_DIR/CMakeFiles__evosdpa_objects.dir__src__kernels__mma__inst__x.cu.o.ptxas.log), so two sources of
# the same name in different folders never share a log. The first line of the log names the object by
# its absolute path; the report (src/host/ptxas_report.cpp) skips and deletes a log whose object no
# longer exists or is no longer one of the library's objects, so a source removed or renamed since its
# log was written cannot leave stale kernels in the report.
set -u
logdir=$1
builddir=$2
shift 2
out=object
prev=
for arg in "$@"; do
  [ "$prev" = "-o" ] && out=$arg
  prev=$arg
done
case $out in
  /*) abs=$out ;;
  *) abs=$PWD/$out ;;
esac
rel=${abs#"${builddir%/}"/}
mkdir -p "$logdir"
log="$logdir/${rel//\//__}.ptxas.log"
printf '# evosdpa-ptxas-log object=%s\n' "$abs" >"$log.tmp"
"$@" 2>>"$log.tmp"
rc=$?
# Pass on everything but the header and the routine resource lines, so warnings and errors still show
# in the build.
grep -v -E '^# evosdpa-ptxas-log |^ptxas info|^    [0-9]+ bytes stack frame' "$log.tmp" >&2
mv "$log.tmp" "$log"
exit $rc
