#!/usr/bin/env bash
# Run a command while a busy loop holds one core, as another program on a shared machine does: the gate must
# pass on a busy machine too (`make check-under-load`). The loop ends with the command, whatever its exit.
set -uo pipefail
if [ "$#" -eq 0 ]; then
  echo "usage: deploy/under-load.sh COMMAND [ARG...]" >&2
  exit 2
fi
bash -c 'while :; do :; done' &
BUSY=$!
trap 'kill "$BUSY" 2>/dev/null; wait "$BUSY" 2>/dev/null' EXIT INT TERM
echo "under-load: a busy loop (pid $BUSY) holds one core while: $*" >&2
"$@"
