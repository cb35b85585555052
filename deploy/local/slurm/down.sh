#!/usr/bin/env bash
# Stop what up.sh started (by the pids it recorded), in reverse order; leaves shared services it only reused alone.
# Environment: KB_HOME (default ~/.kernelboard).
set -uo pipefail

KB_HOME="${KB_HOME:-$HOME/.kernelboard}"
STATE="$KB_HOME/slurm"
STARTED="$STATE/run/started"
say() { echo "slurm-down: $*" >&2; }

pidfile_of() {
  case "$1" in
    munged) echo /run/munge/munged.pid ;;
    mariadb) echo "$(cat "$STATE/mariadb-home" 2>/dev/null || echo "$STATE")/mariadb-run/mariadb.pid" ;;
    *) echo "$STATE/run/$1.pid" ;;
  esac
}

stop() {
  local name="$1" pidfile pid
  pidfile="$(pidfile_of "$name")"
  [[ -s "$pidfile" ]] || { say "$name: no pid file"; return 0; }
  pid="$(cat "$pidfile")"
  kill -0 "$pid" 2>/dev/null || { say "$name: not running"; return 0; }
  kill -TERM "$pid"
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || { say "$name ($pid) stopped"; return 0; }; sleep 0.25; done
  say "$name ($pid) ignored SIGTERM for 10 s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
}

[[ -s "$STARTED" ]] || { say "nothing recorded as started in $STARTED"; exit 0; }
for name in $(grep -x 'slurmd-.*' "$STARTED") slurmd slurmctld slurmdbd mariadb munged; do
  grep -qx "$name" "$STARTED" && stop "$name"
done
rm -f "$STARTED"
