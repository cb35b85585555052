#!/usr/bin/env bash
# The job user: the unprivileged Unix user Slurm runs every compute job as (sbatch --uid), shared by all principals
# (why one user: deploy/local/slurm/README.md, "Who jobs run as"). Idempotent: creates it when missing, then checks
# what a job's sandbox needs from this host: the user is not root, and it can enter a user namespace of its own
# (services/common/sandbox.py job_batch_script). Prints one line; exits non-zero naming what is wrong.
#
# Environment: KB_JOB_USER (default kb-job).
set -euo pipefail
user="${KB_JOB_USER:-kb-job}"
[[ "$user" =~ ^[a-z_][a-z0-9_-]{0,30}$ ]] || { echo "job-user: KB_JOB_USER=$user is not a user name" >&2; exit 1; }
made="exists"
if ! id -u "$user" >/dev/null 2>&1; then
  [[ $EUID -eq 0 ]] || { echo "job-user: $user is missing and creating it needs root" >&2; exit 1; }
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user" ||
    id -u "$user" >/dev/null 2>&1 || { echo "job-user: useradd $user failed" >&2; exit 1; }  # made meanwhile
  made="created"
fi
uid="$(id -u "$user")"
[[ "$uid" != 0 ]] || { echo "job-user: $user has uid 0; jobs must not run as root" >&2; exit 1; }
# A job confines itself: an unprivileged user namespace (mount, network, PID) mapping the user to itself.
as_user=(runuser -u "$user" --)
[[ $EUID -eq 0 ]] || as_user=()  # not root: the check runs as this user, which says as much for the namespaces
if ! (cd / && timeout 20 "${as_user[@]}" unshare --user --map-user="$uid" --map-group="$(id -g "$user")" \
  --keep-caps --net --mount --pid --fork true) 2>/dev/null; then
  echo "job-user: $user cannot enter a user namespace (sysctl user.max_user_namespaces=$(sysctl -n user.max_user_namespaces 2>/dev/null || echo '?'));" \
    "jobs could not be confined, so none would run" >&2
  exit 1
fi
echo "job user $user (uid $uid) $made; user namespaces work"
