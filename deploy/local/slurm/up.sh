#!/usr/bin/env bash
# Bring up a real Slurm 22.05 on this host (munged, slurmdbd on MariaDB, slurmctld, one slurmd per node: the jobs'
# node `jobs` and the runner nodes of the checks' partition, `slurmd -N runnerN`) for kernelboard.
# Idempotent: what already runs is left alone. Every wait is bounded. State lives in $KB_HOME/slurm.
# On success prints the SLURM_CONF to export; also written to $KB_HOME/slurm/env.
#
# Environment: KB_HOME (default ~/.kernelboard), KB_RULES (default <repo>/scienceslack.json),
#              KB_SLURM_DB_PORT (default 3306: an existing MariaDB there is reused, else one is started),
#              KB_SLURM_PORT_BASE (default 6817: slurmctld, slurmd = +1, slurmdbd = +2; another base lets a second
#              cluster run beside the first; runner nodes listen on +10 on), KB_SLURM_RUNNERS (default 3: runner
#              nodes), KB_SLURM_GPUS (default: nvidia-smi's count; above 0 the runners are one node with them all),
#              KB_SLURM_NO_INSTALL=1 to fail instead of running apt-get.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
KB_HOME="${KB_HOME:-$HOME/.kernelboard}"
STATE="$KB_HOME/slurm"
ETC="$STATE/etc"
RULES="${KB_RULES:-$REPO/scienceslack.json}"
DB_PORT="${KB_SLURM_DB_PORT:-3306}"
# A cluster keeps the ports and runners it was first brought up with: a rerun that does not name them must not
# render another cluster's ports (and reconfigure that one).
PORT_BASE="${KB_SLURM_PORT_BASE:-$(cat "$STATE/port-base" 2>/dev/null ||
  sed -n 's/^SlurmctldPort=\([0-9]*\)$/\1/p' "$ETC/slurm.conf" 2>/dev/null | grep . || echo 6817)}"
RUNNERS="${KB_SLURM_RUNNERS:-$(cat "$STATE/runners" 2>/dev/null || echo 3)}"
# GPUs of this machine: on a GPU machine the runners' partition is one node holding them all (render.py).
GPUS="${KB_SLURM_GPUS:-$( (timeout 20 nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU ' || true)}"
export SLURM_CONF="$ETC/slurm.conf"
PYTHON="$(command -v /usr/bin/python3 || command -v python3)"

say() { echo "slurm-up: $*" >&2; }
die() { say "FAILED: $*"; exit 1; }

# wait_for SECONDS WHAT COMMAND...: poll COMMAND until it succeeds or the deadline passes.
wait_for() {
  local seconds="$1" what="$2"; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
  say "$what ready"
}

alive() { [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
port_busy() { timeout 3 bash -c "</dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# A daemon of another cluster on our port would make ours die at bind, with the reason only in its log.
check_port_free() {
  local name="$1" port="$2"
  alive "$STATE/run/$name.pid" && return 0
  port_busy "$port" || return 0
  die "port $port (for $name) is taken by another Slurm not started from $STATE: use that cluster's SLURM_CONF," \
    "stop it with its down.sh, or set KB_SLURM_PORT_BASE to run a second cluster"
}
mark_started() { grep -qx "$1" "$STATE/run/started" 2>/dev/null || echo "$1" >>"$STATE/run/started"; }

install_packages() {
  local missing=()
  for bin in slurmctld slurmd slurmdbd sbatch munged mariadbd mysql; do
    command -v "$bin" >/dev/null || missing+=("$bin")
  done
  ((${#missing[@]} == 0)) && return 0
  [[ "${KB_SLURM_NO_INSTALL:-}" == 1 ]] && die "missing ${missing[*]} and KB_SLURM_NO_INSTALL=1"
  say "installing Slurm, munge and MariaDB (missing: ${missing[*]})"
  export DEBIAN_FRONTEND=noninteractive
  timeout 300 apt-get install -y -q slurmctld slurmd slurm-client slurmdbd munge mariadb-server >"$STATE/log/apt.log" 2>&1 ||
    { timeout 120 apt-get update -q >>"$STATE/log/apt.log" 2>&1 &&
      timeout 300 apt-get install -y -q slurmctld slurmd slurm-client slurmdbd munge mariadb-server >>"$STATE/log/apt.log" 2>&1; } ||
    die "apt-get install failed; see $STATE/log/apt.log"
}

start_munge() {
  if [[ -S /run/munge/munge.socket.2 ]] && timeout 5 munge -n </dev/null | timeout 5 unmunge >/dev/null 2>&1; then
    say "munged already running"; return 0
  fi
  [[ -s /etc/munge/munge.key ]] || { timeout 30 mungekey --create >/dev/null 2>&1 || die "cannot create /etc/munge/munge.key"; }
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
  # Keep the default socket: sacctmgr ignored a custom one.
  timeout 10 runuser -u munge -- /usr/sbin/munged --force || die "munged did not start; see /var/log/munge/munged.log"
  mark_started munged
  wait_for 10 munged bash -c 'munge -n </dev/null | unmunge' || die "munged started but credentials do not round-trip"
}

mysql_root() {
  if [[ -n "${OWN_DB_SOCKET:-}" ]]; then
    timeout 10 mysql --protocol=socket -S "$OWN_DB_SOCKET" -u root "$@"
  else
    timeout 10 mysql -u root "$@" 2>/dev/null || timeout 10 mysql -u root -h 127.0.0.1 -P "$DB_PORT" "$@"
  fi
}

# Where MariaDB's folders go: under the state directory when user mysql can reach it; otherwise (a state directory
# under /root, mode 700) in /var/tmp, named after the state directory. Recorded for down.sh.
mariadb_home() {
  if [[ ! -s "$STATE/mariadb-home" ]]; then
    if runuser -u mysql -- test -x "$STATE" 2>/dev/null; then
      echo "$STATE" >"$STATE/mariadb-home"
    else
      echo "/var/tmp/kernelboard-mariadb-$(echo -n "$STATE" | sha256sum | cut -c1-12)" >"$STATE/mariadb-home"
    fi
  fi
  cat "$STATE/mariadb-home"
}

start_mariadb() {
  # mariadbd runs as user mysql: its data, socket, pid file and log live in folders that user owns.
  local home
  home="$(mariadb_home)"
  local datadir="$home/mariadb" own="$home/mariadb-run"
  if alive "$own/mariadb.pid"; then
    OWN_DB_SOCKET="$own/mariadb.sock"
    say "MariaDB (ours, port $DB_PORT) already running"
  elif port_busy "$DB_PORT"; then
    say "reusing the MariaDB listening on 127.0.0.1:$DB_PORT"
  else
    OWN_DB_SOCKET="$own/mariadb.sock"
    install -d "$home"
    install -d -o mysql -g mysql "$own"
    if [[ ! -d "$datadir/mysql" ]]; then
      install -d -o mysql -g mysql "$datadir"
      timeout 120 mariadb-install-db --user=mysql --datadir="$datadir" --auth-root-authentication-method=socket \
        >"$STATE/log/mariadb-install.log" 2>&1 || die "mariadb-install-db failed; see $STATE/log/mariadb-install.log"
    fi
    if ! alive "$own/mariadb.pid"; then
      nohup mariadbd --user=mysql --datadir="$datadir" --port="$DB_PORT" --bind-address=127.0.0.1 \
        --socket="$OWN_DB_SOCKET" --pid-file="$own/mariadb.pid" --log-error="$own/mariadb.log" \
        >/dev/null 2>&1 &
      mark_started mariadb
    fi
    wait_for 60 mariadb mysql_root -e 'select 1' || die "MariaDB did not answer within 60 s; see $own/mariadb.log"
  fi
  # One accounting database per cluster state: a fresh state restarts job ids at 1, and old records under the same
  # ids would show up in sacct.
  # Its own database user too, so that bringing up another cluster never changes this one's password.
  [[ -s "$STATE/db-name" ]] || echo "kb_slurm_acct_$(date +%Y%m%d%H%M%S)_$$" >"$STATE/db-name"
  DB_NAME="$(cat "$STATE/db-name")"
  DB_USER="kb_slurm_$(echo "$DB_NAME" | md5sum | head -c 10)"
  [[ -s "$STATE/db-password" ]] || (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$STATE/db-password")
  local password; password="$(cat "$STATE/db-password")"
  mysql_root -e "CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$password';
    CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$password';
    ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$password';
    ALTER USER '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$password';
    CREATE DATABASE IF NOT EXISTS $DB_NAME;
    GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'localhost';
    GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'127.0.0.1';" ||
    die "cannot create the accounting database user in MariaDB on port $DB_PORT (need root access via its socket)"
}

render_configs() {
  install -d "$ETC.new"
  "$PYTHON" "$HERE/render.py" --rules "$RULES" --state-dir "$STATE" --out-dir "$ETC.new" --db-port "$DB_PORT" \
    --db-user "$DB_USER" --db-name "$DB_NAME" --db-password-file "$STATE/db-password" --port-base "$PORT_BASE" --runners "$RUNNERS" --gpus "$GPUS" ||
    die "rendering the configs failed"
  cp -p "$ETC.new/slurm.conf" "$ETC.new/slurmdbd.conf" "$ETC/"
  if [[ -e "$ETC.new/gres.conf" ]]; then cp -p "$ETC.new/gres.conf" "$ETC/"; else rm -f "$ETC/gres.conf"; fi
  rm -rf "$ETC.new"
}

start_slurmdbd() {
  # What each running daemon was started with is kept in run/: a changed config means restart (slurmdbd) or
  # reconfigure (slurmctld), even when an earlier up.sh wrote the config and then failed.
  if alive "$STATE/run/slurmdbd.pid" && ! cmp -s "$ETC/slurmdbd.conf" "$STATE/run/slurmdbd.conf.running"; then
    say "slurmdbd.conf changed: restarting slurmdbd"
    local pid; pid="$(cat "$STATE/run/slurmdbd.pid")"
    kill -TERM "$pid"
    wait_for 20 "old slurmdbd exit" bash -c "! kill -0 $pid" || die "slurmdbd ($pid) did not stop within 20 s"
  fi
  if alive "$STATE/run/slurmdbd.pid"; then
    say "slurmdbd already running"
  else
    timeout 30 slurmdbd || die "slurmdbd did not start; see $STATE/log/slurmdbd.log"
    mark_started slurmdbd
    cp -p "$ETC/slurmdbd.conf" "$STATE/run/slurmdbd.conf.running"
  fi
  # Registering the cluster also proves slurmdbd talks to the database; sacctmgr says "Nothing new added" when it exists.
  wait_for 60 slurmdbd bash -c "timeout 10 sacctmgr -n list cluster format=cluster | grep -q . || timeout 10 sacctmgr -i add cluster kernelboard" ||
    die "slurmdbd does not answer sacctmgr within 60 s; see $STATE/log/slurmdbd.log"
  timeout 10 sacctmgr -n -P list cluster format=cluster | grep -qx kernelboard ||
    timeout 10 sacctmgr -i add cluster kernelboard >/dev/null || die "cannot register cluster kernelboard in slurmdbd"
  add_accounts
}

# The accounts of contracts/runners.py, enforced (AccountingStorageEnforce=associations): the job user may submit
# under kb-jobs only; root (the verifier and the scheduler) under its own, kb-jobs and kb-runners, the only account
# the runners' partition allows.
add_accounts() {
  local job_user="${KB_JOB_USER:-kb-job}" assoc
  assoc() { timeout 10 sacctmgr -n -P show assoc cluster=kernelboard format=user,account 2>/dev/null; }
  for account in kb-jobs kb-runners; do
    assoc | grep -q "^|$account$" || timeout 10 sacctmgr -i add account "$account" cluster=kernelboard \
      description="kernelboard $account" organization=kernelboard >/dev/null || die "cannot add account $account"
  done
  assoc | grep -qx "root|kb-runners" || timeout 10 sacctmgr -i add user root account=kb-jobs,kb-runners \
    cluster=kernelboard >/dev/null || die "cannot give root the accounts kb-jobs and kb-runners"
  assoc | grep -qx "$job_user|kb-jobs" || timeout 10 sacctmgr -i add user "$job_user" account=kb-jobs \
    defaultaccount=kb-jobs cluster=kernelboard >/dev/null || die "cannot give $job_user the account kb-jobs"
  say "accounts: $(assoc | grep -E '\|kb-(jobs|runners)$' | tr '\n' ' ')"
}

# The nodes of the rendered config, the jobs' node first.
node_names() { sed -n 's/^NodeName=\([^ ]*\) .*/\1/p' "$ETC/slurm.conf" | paste -sd, | xargs -r scontrol show hostnames; }
# Every node takes jobs: no state other than these, and none flagged (* not responding).
node_ready() {
  local states; states="$(timeout 5 sinfo -h -N -o '%N %T' | sort -u)" || return 1
  [[ -n "$states" ]] && ! grep -Evq ' (idle|mixed|allocated|completing)$' <<<"$states"
}

# Plugins are loaded once by each daemon: a change of one needs a restart, not `scontrol reconfigure`. Running jobs
# survive both (slurmstepd keeps them; the controller's state is saved).
needs_restart() {
  # Nodes too: 22.05 adds or removes a node only at a restart; and a slurmd's own paths.
  local restart='^(TaskPlugin|ProctrackType|JobAcctGatherType|SelectType|SwitchType|MaxArraySize|NodeName|SlurmdPidFile|SlurmdSpoolDir|AccountingStorageEnforce|SlurmctldPort|SlurmdPort|GresTypes|AccountingStorageTRES)='
  ! diff <(grep -E "$restart" "$1" 2>/dev/null) <(grep -E "$restart" "$2") >/dev/null
}

stop_daemon() {
  local name="$1" pid
  pid="$(cat "$STATE/run/$name.pid")"
  kill -TERM "$pid" 2>/dev/null || true
  wait_for 30 "old $name exit" bash -c "! kill -0 $pid" || die "$name ($pid) did not stop within 30 s"
}

# slurmd of each node, by its pid file (run/slurmd-<node>.pid); run/slurmd.pid is the one slurmd of a config before
# runner nodes.
stop_slurmds() {
  alive "$STATE/run/slurmd.pid" && stop_daemon slurmd
  local node
  for node in $(node_names) $(sed -n 's/^slurmd-//p' "$STATE/run/started" 2>/dev/null); do
    alive "$STATE/run/slurmd-$node.pid" && stop_daemon "slurmd-$node"
  done
  return 0
}

start_slurm() {
  # Every daemon of the old config goes, slurmd included, even where slurmctld had died already.
  if [[ -e "$STATE/run/slurm.conf.running" ]] && ! cmp -s "$ETC/slurm.conf" "$STATE/run/slurm.conf.running" &&
    needs_restart "$STATE/run/slurm.conf.running" "$ETC/slurm.conf"; then
    say "slurm.conf changed its plugins, nodes or ports: restarting slurmctld and slurmd"
    alive "$STATE/run/slurmctld.pid" && stop_daemon slurmctld
    stop_slurmds
  fi
  if alive "$STATE/run/slurmctld.pid"; then
    say "slurmctld already running"
    if ! cmp -s "$ETC/slurm.conf" "$STATE/run/slurm.conf.running"; then
      timeout 20 scontrol reconfigure || die "scontrol reconfigure failed"
      say "slurm.conf changed: reconfigured"
    fi
  else
    timeout 30 slurmctld || die "slurmctld did not start; see $STATE/log/slurmctld.log"
    mark_started slurmctld
  fi
  cp -p "$ETC/slurm.conf" "$STATE/run/slurm.conf.running"
  local node
  for node in $(node_names); do
    if alive "$STATE/run/slurmd-$node.pid"; then
      say "slurmd of $node already running"
    else
      install -d "$STATE/spool/$node"
      timeout 30 slurmd -N "$node" || die "slurmd of $node did not start; see $STATE/log/slurmd-$node.log"
      mark_started "slurmd-$node"
    fi
  done
  # A restarted controller shows the nodes `unk` for a few seconds.
  if ! wait_for 60 "nodes $(node_names | paste -sd' ')" node_ready; then
    timeout 10 scontrol update nodename="$(node_names | paste -sd,)" state=resume >/dev/null 2>&1 || true
    wait_for 15 "nodes" node_ready ||
      die "nodes not idle within 75 s (sinfo: $(timeout 5 sinfo -h -N -o '%N %T %E' 2>&1 | tr '\n' ';')); see $STATE/log/slurmctld.log and slurmd-*.log"
  fi
}

main() {
  local started=$SECONDS
  [[ $EUID -eq 0 ]] || die "run as root (the daemons run as root in this single-node setup)"
  [[ -r "$RULES" ]] || die "no rules file at $RULES (set KB_RULES)"
  install -d -m 0755 "$STATE" "$STATE/run" "$STATE/log" "$STATE/ctld" "$STATE/spool" "$ETC"
  [[ "$PORT_BASE" =~ ^[0-9]+$ && "$RUNNERS" =~ ^[1-9][0-9]?$ ]] ||
    die "KB_SLURM_PORT_BASE ($PORT_BASE) must be a port and KB_SLURM_RUNNERS ($RUNNERS) from 1 to 99"
  echo "$PORT_BASE" >"$STATE/port-base"
  echo "$RUNNERS" >"$STATE/runners"
  check_port_free slurmctld "$PORT_BASE"
  alive "$STATE/run/slurmd.pid" || check_port_free slurmd-jobs $((PORT_BASE + 1))
  check_port_free slurmdbd $((PORT_BASE + 2))
  local index
  for ((index = 0; index < RUNNERS; index++)); do check_port_free "slurmd-runner$((index + 1))" $((PORT_BASE + 10 + index)); done
  install_packages
  local job_user
  job_user="$(bash "$HERE/job-user.sh")" || die "the job user is not usable (deploy/local/slurm/job-user.sh)"
  say "$job_user"
  start_munge
  start_mariadb
  render_configs
  start_slurmdbd
  start_slurm
  echo "export SLURM_CONF=$SLURM_CONF" >"$STATE/env"
  say "up in $((SECONDS - started)) s; partitions: $(timeout 5 sinfo -h -o '%P %l %c %D' | tr '\n' ' ')"
  echo "export SLURM_CONF=$SLURM_CONF"
}

main "$@"
