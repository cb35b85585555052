# slurm.sh: sbatch, squeue, sacct and scancel for kernelboard's cluster, from your clone.
# Source it (`source slurm.sh`, or `eval "$(kb job slurm-sh)"`): the four commands act through the scheduler's API
# with your kb sign-in, so jobs run from what you pushed (`kb push` first) and nobody touches Slurm directly.
# Resources go in the script's #SBATCH lines; the scheduler checks them against the partition limits before sbatch.

sbatch() {
  local parsable="" script=""
  while (($#)); do
    case "$1" in
      --parsable) parsable=--parsable ;;
      -*) echo "sbatch: option $1 is not taken on the command line here: put it in an #SBATCH line of the script" >&2; return 2 ;;
      *) if [[ -n "$script" ]]; then echo "sbatch: one script, no script arguments" >&2; return 2; fi; script="$1" ;;
    esac
    shift
  done
  [[ -n "$script" ]] || { echo "usage: sbatch [--parsable] SCRIPT (pushed with kb push)" >&2; return 2; }
  kb job submit $parsable "$script"
}

squeue() {
  case "${1:-}" in
    "") kb job list --live --format squeue ;;
    *) echo "squeue: no options here; every live job of the deployment is listed" >&2; return 2 ;;
  esac
}

sacct() {
  local ids=""
  while (($#)); do
    case "$1" in
      -j) ids="$2"; shift ;;
      -j*) ids="${1#-j}" ;;
      --jobs=*) ids="${1#--jobs=}" ;;
      *) ;;  # other sacct options are accepted and ignored: the columns are fixed
    esac
    shift
  done
  if [[ -z "$ids" ]]; then kb job list --format sacct; return; fi
  local header=1 id
  for id in ${ids//,/ }; do
    kb job list --format sacct | awk -F'|' -v id="$id" -v header="$header" 'NR == 1 && header { print } NR > 1 && $1 == id { print }'
    header=0
  done
}

scancel() {
  (($#)) || { echo "usage: scancel JOBID..." >&2; return 2; }
  local id status=0
  for id in "$@"; do kb job cancel "$id" || status=1; done
  return $status
}
