#!/usr/bin/env bash
# The job user: the unprivileged Unix user Slurm runs every compute job as (sbatch --uid), shared by all principals
# (why one user: deploy/local/slurm/README.md, "Who jobs run as"). Idempotent: creates it when missing, then checks
# what a job's sandbox needs from this host: the user is not root, and it can enter a user namespace of its own
# (services/common/sandbox.py job_batch_script), and it can run the Python jobs run with (the checks': torch and
# triton). Prints one line; exits non-zero naming what is wrong.
#
# Environment: KB_JOB_USER (default kb-job); KB_JOB_PYTHON (default KB_VERIFIER_PYTHON, else this checkout's
# .venv/bin/python): the interpreter the scheduler puts first on a job's PATH.
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
# The job's Python: where a folder on the way to it is closed to others (a pyenv under /root), it is opened for passing
# through (o+x: no listing). A job still sees nothing else there: its sandbox covers /root and binds back only the
# Python's own folders (services/common/sandbox.py, JOB_COVERED).
python="${KB_JOB_PYTHON:-${KB_VERIFIER_PYTHON:-$(cd "$(dirname "$0")/../../.." && pwd)/.venv/bin/python}}"
runtime="no Python for jobs at $python"
if [[ -x "$python" ]]; then
  opened=()
  while IFS= read -r path; do
    dir="$path"
    while [[ "$dir" != / && -n "$dir" ]]; do
      if [[ -d "$dir" && $(( $(stat -c '0%a' "$dir") & 1 )) -eq 0 && $EUID -eq 0 ]]; then
        chmod o+x "$dir" && opened+=("$dir")
      fi
      dir="$(dirname "$dir")"
    done
  done < <("$python" -I -c 'import sys; print(sys.prefix); print(sys.base_prefix)'; readlink -f "$python")
  if versions="$(cd / && timeout 120 "${as_user[@]}" "$python" -I -c \
    'import torch, triton; print(f"torch {torch.__version__}, triton {triton.__version__}")' 2>/dev/null)"; then
    runtime="jobs run $python ($versions)"
  else
    runtime="$user cannot import torch and triton with $python: jobs will not find them"
  fi
  [[ ${#opened[@]} -eq 0 ]] || runtime+="; opened for passing: ${opened[*]}"
fi
echo "job user $user (uid $uid) $made; user namespaces work; $runtime"
