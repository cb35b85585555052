#!/usr/bin/env bash
# Runs inside fresh network, mount and PID namespaces (unshare --net --mount --pid --fork --mount-proc), as root,
# before the check script: the check's box becomes its only writable place and everything that could reach the
# deployment is hidden.
#   sandbox_setup.sh BOX INNER [HIDDEN_DIR ...] -- COMMAND ...
# BOX (the host directory of this check) is mounted at INNER; every other mount turns read-only; /tmp, /run,
# /dev/shm and each HIDDEN_DIR (KB_HOME, credentials) are covered by empty tmpfs (unix sockets such as PostgreSQL's
# live there); then COMMAND runs in INNER/work with every capability dropped, so it cannot undo any of this.
set -euo pipefail
box="$1" inner="$2"
shift 2
hidden=(/tmp /run /dev/shm)
while [[ $# -gt 0 && "$1" != "--" ]]; do
    hidden+=("$1")
    shift
done
shift

mount --make-rprivate /
mount --bind "$box" "$inner"
awk '{print $5}' /proc/self/mountinfo | sort -u | while read -r mount_point; do
    case "$mount_point" in /proc | /proc/* | /sys | /sys/* | /dev | /dev/*) continue ;; esac
    mount -o remount,bind,ro "$mount_point" 2>/dev/null || true
done
for dir in "${hidden[@]}"; do
    if [[ -d "$dir" ]]; then
        mount -t tmpfs -o size=512m,mode=1777,nosuid,nodev tmpfs "$dir"
    fi
done
mount -o remount,bind,rw,nosuid,nodev "$inner"
cd "$inner/work"
exec setpriv --bounding-set=-all --inh-caps=-all --no-new-privs -- "$@"
