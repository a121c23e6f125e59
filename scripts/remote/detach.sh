#!/usr/bin/env bash
# Starts a command in a new process session on a lent GPU machine, where it outlives the call that started it and
# runs on until the machine goes back (the device tool ends a call's other processes when it returns).
#
#   bash scripts/remote/detach.sh NAME COMMAND [ARGS ...]
#
# Its output goes to ~/vfi/jobs/NAME.log and its exit status, once it ends, to ~/vfi/jobs/NAME.rc.
set -euo pipefail
name=${1:?a name for the job}
shift
jobs=~/vfi/jobs
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
mkdir -p "$jobs"
rm -f "$jobs/$name.rc"
setsid nohup bash -c '"$@"; echo $? > "'"$jobs/$name.rc"'"' _ "$@" > "$jobs/$name.log" 2>&1 < /dev/null &
echo "started $name (pid $!), log $jobs/$name.log"
