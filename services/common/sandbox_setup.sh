#!/usr/bin/env bash
# Runs inside fresh network, mount and PID namespaces (unshare --net --mount --pid --fork --mount-proc), as root,
# before the check script: the check's box becomes its only writable place and everything that could reach the
# deployment is hidden.
#   sandbox_setup.sh BOX INNER [HIDDEN_DIR ...] [+VISIBLE_DIR ...] -- COMMAND ...
# BOX (the host directory of this check) is mounted at INNER; every other mount turns read-only; /tmp, /run,
# /dev/shm and each HIDDEN_DIR (KB_HOME, credentials) are covered by empty tmpfs (unix sockets such as PostgreSQL's
# live there); each VISIBLE_DIR (the Python and the project the check runs on) that lay under a covered directory is
# put back read-only, and a hidden directory inside it covered again; then COMMAND runs in INNER/work with every
# capability dropped but those its harness needs to confine route code further (see the end).
set -euo pipefail
box="$1" inner="$2"
shift 2
hidden=(/tmp /run /dev/shm)
visible=()
while [[ $# -gt 0 && "$1" != "--" ]]; do
    case "$1" in
    +*) visible+=("${1#+}") ;;
    *) hidden+=("$1") ;;
    esac
    shift
done
shift

under() { [[ "$1" == "$2" || "$1" == "$2"/* ]]; } # under PATH DIR: PATH is DIR or inside it
hide() { [[ -d "$1" ]] && mount -t tmpfs -o size=512m,mode=1777,nosuid,nodev tmpfs "$1"; }

mount --make-rprivate /
mount --bind "$box" "$inner"
# A visible directory that a tmpfs is about to cover is parked in the box first, then moved back on top of it.
parked=()
for dir in "${visible[@]}"; do
    for cover in "${hidden[@]}"; do
        if [[ -d "$dir" ]] && under "$dir" "$cover"; then
            spot="$inner/.visible/${#parked[@]}"
            mkdir -p "$spot"
            mount --bind "$dir" "$spot"
            parked+=("$dir")
            break
        fi
    done
done
awk '{print $5}' /proc/self/mountinfo | sort -u | while read -r mount_point; do
    case "$mount_point" in /proc | /proc/* | /sys | /sys/* | /dev | /dev/*) continue ;; esac
    mount -o remount,bind,ro "$mount_point" 2>/dev/null || true
done
for dir in "${hidden[@]}"; do
    hide "$dir" || true
done
for i in "${!parked[@]}"; do
    mkdir -p "${parked[$i]}"
    mount --move "$inner/.visible/$i" "${parked[$i]}"
    for dir in "${hidden[@]}"; do
        if under "$dir" "${parked[$i]}" && [[ "$dir" != "${parked[$i]}" ]]; then hide "$dir" || true; fi
    done
done
mount -o remount,bind,rw,nosuid,nodev "$inner"
cd "$inner/work"
# The check script is the rules commit's (approved by maintainers) and its harness is this installation's: it keeps
# what it needs to confine the route's code in turn (bubblewrap's namespaces and mounts, the drop to the job user, its
# cgroup (cgroupfs wants DAC override here) and killing it: services/common/confine.py); route code never has any.
exec setpriv --bounding-set=-all,+sys_admin,+sys_chroot,+setuid,+setgid,+setpcap,+net_admin,+kill,+dac_override \
    --inh-caps=-all --no-new-privs -- "$@"
