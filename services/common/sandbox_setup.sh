#!/usr/bin/env bash
# Runs inside fresh network, mount and PID namespaces (unshare --net --mount --pid --fork --mount-proc), as root,
# before the check script: the check's box becomes its only writable place and everything that could reach the
# deployment is hidden.
#   sandbox_setup.sh BOX INNER [COVER ...] [+BIND_BACK ...] [^RECOVER ...] -- COMMAND ...
# The lists are a mount plan decided in Python (services/common/mounts.py, mount_plan; this script decides nothing):
# BOX (the host directory of this check) is mounted at INNER; every other mount turns read-only; each COVER (/tmp,
# /run, /dev/shm, KB_HOME, credentials: unix sockets such as PostgreSQL's live there) is covered by empty tmpfs; each
# BIND_BACK (the Python and the project the check runs on, where a cover or the box took them away) is put back
# read-only on top; then each RECOVER (a covered directory inside a bind-back, which brought it back) is covered
# again; then COMMAND runs in INNER/work with every capability dropped but those its harness needs to confine route
# code further (see the end).
set -euo pipefail
box="$1" inner="$2"
shift 2
covers=() bind_backs=() recovers=()
while [[ $# -gt 0 && "$1" != "--" ]]; do
    case "$1" in
    +*) bind_backs+=("${1#+}") ;;
    ^*) recovers+=("${1#^}") ;;
    *) covers+=("$1") ;;
    esac
    shift
done
shift

cover() { mount -t tmpfs -o size=512m,mode=1777,nosuid,nodev tmpfs "$1"; }
hide() { [[ -d "$1" ]] && cover "$1"; }

mount --make-rprivate /
# Each bind-back is parked in the box before the box or a tmpfs covers it, and moved back on top of them at the end.
# From the box's host path (this shell's directory, still reached once the box covers INNER: a checkout under INNER
# lies there), the parked mounts go with the box to INNER and leave the host path.
cd "$box"
for i in "${!bind_backs[@]}"; do
    mkdir -p ".visible/$i"
    mount --bind "${bind_backs[$i]}" ".visible/$i"
done
mount --rbind "$box" "$inner"
for i in "${!bind_backs[@]}"; do
    # A job enters here as the job user (in a user namespace of its own), whose umount looks the path up and cannot
    # find it once the box covers INNER: the parked copy then stays at the box's host path, which a cover hides (the
    # job directories are hidden, or lie under INNER), read-only like every other mount.
    umount ".visible/$i" 2>/dev/null || [[ $EUID -ne 0 ]]
done
cd /
awk '{print $5}' /proc/self/mountinfo | sort -u | while read -r mount_point; do
    case "$mount_point" in /proc | /proc/* | /sys | /sys/* | /dev | /dev/*) continue ;; esac
    mount -o remount,bind,ro "$mount_point" 2>/dev/null || true
done
for dir in "${covers[@]}"; do
    hide "$dir" || true
done
mount -o remount,bind,rw,nosuid,nodev "$inner"
for i in "${!bind_backs[@]}"; do
    mkdir -p "${bind_backs[$i]}"
    mount --move "$inner/.visible/$i" "${bind_backs[$i]}"
done
# The parking folders go, except in a job (the job user here): its box is root's, and the copies left at the box's
# host path keep their folders busy; they stay, empty.
[[ ${#bind_backs[@]} -eq 0 ]] || rmdir "$inner/.visible"/* "$inner/.visible" 2>/dev/null || [[ $EUID -ne 0 ]]
for dir in "${recovers[@]}"; do
    cover "$dir" # it lies in a bind-back, so it is there: if it cannot be covered, nothing runs
done
cd "$inner/work"
# The check script is the rules commit's (approved by maintainers) and its harness is this installation's: it keeps
# what it needs to confine the route's code in turn (bubblewrap's namespaces and mounts, the drop to the job user, its
# cgroup (cgroupfs wants DAC override here) and killing it: services/verifier/harness/confine.py); route code never has any.
exec setpriv --bounding-set=-all,+sys_admin,+sys_chroot,+setuid,+setgid,+setpcap,+net_admin,+kill,+dac_override \
    --inh-caps=-all --no-new-privs -- "$@"
