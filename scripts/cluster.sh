#!/usr/bin/env bash
# A cluster of hosts on this machine, for multi-host runs and their
# failures (docs/cluster.md). Each host is its own set of Linux namespaces
# (network, UTS, mount, PID) with a hostname, an address on a bridge, and
# its own sshd, munged and slurmd; the first host also runs slurmctld. The
# bridge lives in a namespace of its own: nothing is added to this
# machine's network, and its services are never started.
#
#   cluster.sh up N             start hosts node1..nodeN (idempotent; brings
#                               back a host that was killed)
#   cluster.sh down             stop every host, remove every file
#   cluster.sh exec HOST CMD..  run CMD on HOST (node2, or 2) in this folder
#   cluster.sh link HOST up|down|silent
#                               connect HOST, or cut its link: `down` as a
#                               pulled cable (the host sees its carrier
#                               go), `silent` as a failure further away
#                               (the link stays up, nothing gets through)
#   cluster.sh rate HOST RATE|off   limit HOST's link both ways (100mbit, 1gbit)
#   cluster.sh kill HOST        the host dies: every process on it is killed
#   cluster.sh hosts            the live hosts, their addresses and pids
#
# PARTITA_CLUSTER_DIR names the cluster's folder (default
# /var/tmp/partita-cluster): clusters in different folders are independent.
# Needs root. Each host has its own /run, /dev/shm and temporary directory
# (TMPDIR, OpenMPI's and Slurm's session files); the rest of the file
# system, /tmp included, is shared, as a cluster's network file system
# would be.
set -euo pipefail

dir="${PARTITA_CLUSTER_DIR:-/var/tmp/partita-cluster}"
subnet=10.213.0
python=/usr/bin/python3
self="$(readlink -f "$0")"

die() {
  echo "cluster.sh: error: $*" >&2
  exit 1
}

# PID 1 of a host: reaps the processes daemons leave to it. When it dies
# the kernel kills everything in the host's PID namespace.
init_program='
import os, time
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.2)
'

# Whether process `pid` runs: a zombie has ended, although kill -0 finds it
# (a parent that does not reap, as some containers' PID 1).
running() {
  local state
  state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# Waits up to 10 s for each of `pids` to end.
await_end() {
  local p
  for p in "$@"; do
    for _ in $(seq 200); do
      running "$p" || break
      sleep 0.05
    done
    running "$p" && echo "cluster.sh: warning: process $p did not end" >&2
  done
  return 0
}

alive() { [ -f "$1" ] && running "$(cat "$1")"; }

# The host number of `node3` or `3`.
host_number() {
  local n="${1#node}"
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "\"$1\" is not a host (node1, node2, ... or 1, 2, ...)"
  echo "$n"
}

host_pid() {
  local n
  n="$(host_number "$1")"
  alive "$dir/node$n/pid" || die "host node$n is not up (cluster.sh up)"
  cat "$dir/node$n/pid"
}

# Starts `init_program` in new namespaces (`$@`: unshare's flags) and
# writes the pid of that init, as this machine sees it, to `pidfile`.
start_init() {
  local pidfile="$1"
  shift
  setsid unshare "$@" --fork "$python" -c "$init_program" \
    </dev/null >/dev/null 2>&1 &
  local parent=$! child=""
  for _ in $(seq 100); do
    child="$(pgrep -P "$parent" || true)"
    [ -n "$child" ] && break
    sleep 0.02
  done
  [ -n "$child" ] || die "unshare $* did not start"
  echo "$child" >"$pidfile"
  echo "$parent" >"$pidfile.unshare"
}

in_switch() { nsenter -t "$(cat "$dir/switch.pid")" -n -- "$@"; }

# What every host reads: names, ssh, OpenMPI, munge and Slurm settings.
write_configs() {
  local hosts="$1" etc="$dir/etc"
  mkdir -p "$etc/slurm" "$dir/ssh"
  chmod 755 "$dir" "$etc"
  {
    echo "127.0.0.1 localhost"
    for i in $(seq "$hosts"); do echo "$subnet.$((10 + i)) node$i"; done
  } >"$etc/hosts"
  if [ ! -f "$dir/ssh/id_ed25519" ]; then
    ssh-keygen -q -t ed25519 -N "" -f "$dir/ssh/id_ed25519"
    ssh-keygen -q -t ed25519 -N "" -f "$dir/ssh/host_ed25519"
    cp "$dir/ssh/id_ed25519.pub" "$dir/ssh/authorized_keys"
  fi
  cat >"$etc/ssh_config" <<EOF
Host *
  IdentityFile $dir/ssh/id_ed25519
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  BatchMode yes
  ConnectTimeout 5
EOF

  if [ ! -f "$etc/munge.key" ]; then
    head -c 1024 /dev/urandom >"$etc/munge.key"
    chmod 400 "$etc/munge.key"
  fi
  write_slurm_conf "$hosts" >"$etc/slurm/slurm.conf"
  echo "PMIxCliTmpDirBase=/run/slurm-tmp" >"$etc/slurm/mpi.conf"
  touch "$etc/slurm/plugstack.conf"
}

# What differs between hosts: the temporary directory sessions get, and
# OpenMPI's session directories in it (PIDs repeat across hosts' PID
# namespaces, so files named by PID must not meet).
write_host_configs() {
  local n="$1" own="$dir/node$1"
  mkdir -p "$own/tmp"
  chmod 1777 "$own/tmp"
  cat >"$own/sshd_config" <<EOF
HostKey $dir/ssh/host_ed25519
PidFile /run/sshd.pid
PermitRootLogin prohibit-password
AuthorizedKeysFile $dir/ssh/authorized_keys
StrictModes no
UsePAM no
PrintMotd no
AcceptEnv PARTITA_* OMPI_*
SetEnv TMPDIR=$own/tmp
EOF
  # TCP only, on the cluster's link (not loopback between hosts).
  cat >"$own/openmpi-mca-params.conf" <<EOF
btl_base_warn_component_unused = 0
mtl = ^ofi
pml = ob1
btl = self,vader,tcp
btl_tcp_if_include = eth0
oob_tcp_if_include = eth0
orte_tmpdir_base = $own/tmp
mpi_add_procs_cutoff = 1048576
EOF
}

# Slurm without cgroups (processes tracked by parentage), nodes that return
# to service by themselves once their slurmd answers again, and steps that
# end once a task fails (or 10 s after the first task ends).
write_slurm_conf() {
  local hosts="$1" cpus
  cpus="$(nproc)"
  cat <<EOF
ClusterName=partita
SlurmctldHost=node1
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
KillOnBadExit=1
WaitTime=10
SlurmdTimeout=30
MessageTimeout=5
KillWait=5
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=/run/slurmd
TmpFS=/run/slurm-tmp
StateSaveLocation=/run/slurmctld
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/%n/slurmd.log
NodeName=node[1-$hosts] CPUs=$((cpus > 4 ? cpus : 4)) State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
}

# Inside host `n` (run through nsenter): its own name, /run and /dev/shm,
# the cluster's configuration files over the machine's, and its daemons.
host_setup() {
  local n="$1" etc="$dir/etc" own="$dir/node$1"
  hostname "node$n"
  mount -t tmpfs -o mode=755 tmpfs /run
  mount -t tmpfs -o mode=1777 tmpfs /dev/shm
  mkdir -p /run/sshd /run/munge /run/slurmd /run/slurmctld /run/slurm-tmp
  chmod 700 /run/munge
  chmod 1777 /run/slurm-tmp
  mount --bind "$etc/hosts" /etc/hosts
  mount --bind "$etc/ssh_config" /etc/ssh/ssh_config
  mount --bind "$own/openmpi-mca-params.conf" /etc/openmpi/openmpi-mca-params.conf
  [ -d /etc/slurm ] && mount --bind "$etc/slurm" /etc/slurm
  ip link set lo up
  ip addr add "$subnet.$((10 + n))/24" dev eth0
  ip link set eth0 up
  export TMPDIR="$own/tmp"
  /usr/sbin/sshd -f "$own/sshd_config" -E "$own/sshd.log"
  if command -v munged >/dev/null; then
    munged --force --key-file="$etc/munge.key" \
      --log-file="$dir/node$n/munged.log" --seed-file=/run/munge/seed
  fi
  if [ "$n" = 1 ] && command -v slurmctld >/dev/null; then
    slurmctld
  fi
  if command -v slurmd >/dev/null; then
    slurmd -N "node$n"
  fi
}

up_host() {
  local n="$1" pidfile="$dir/node$1/pid"
  alive "$pidfile" && return 0
  mkdir -p "$dir/node$n"
  chmod 755 "$dir/node$n"
  write_host_configs "$n"
  start_init "$pidfile" --net --uts --mount --pid --mount-proc \
    --propagation private
  local pid
  pid="$(cat "$pidfile")"
  in_switch ip link del "node$n" 2>/dev/null || true
  in_switch ip link add "node$n" type veth peer name eth0 netns "$pid"
  in_switch ip link set "node$n" master br0 up
  nsenter -t "$pid" -n -u -m -p -- "$self" __setup "$n"
}

cmd_up() {
  local hosts="${1:-}"
  [[ "$hosts" =~ ^[1-9][0-9]?$ ]] || die "up needs a host count from 1 to 99"
  [ "$(id -u)" = 0 ] || die "the cluster needs root (namespaces, mounts)"
  local known
  known="$(cat "$dir/hosts" 2>/dev/null || true)"
  if [ -n "$known" ] && [ "$known" != "$hosts" ]; then
    die "$dir holds a cluster of $known hosts; cluster.sh down first"
  fi
  # Whatever ends `up` early (an error, die's exit) takes the cluster down.
  up_done=""
  trap '[ -n "$up_done" ] || { echo "cluster.sh: up failed; taking the cluster down" >&2; cmd_down; }' EXIT
  mkdir -p "$dir"
  echo "$hosts" >"$dir/hosts"
  write_configs "$hosts"
  if ! alive "$dir/switch.pid"; then
    start_init "$dir/switch.pid" --net
    in_switch ip link add br0 type bridge
    in_switch ip link set br0 up
  fi
  for i in $(seq "$hosts"); do up_host "$i"; done
  wait_for_services "$hosts"
  up_done=1
}

# Until every sshd answers and, where Slurm is installed, every node is idle.
wait_for_services() {
  local hosts="$1" pid1
  pid1="$(host_pid 1)"
  for _ in $(seq 100); do
    local ready=1
    for i in $(seq "$hosts"); do
      nsenter -t "$pid1" -n -- bash -c "echo >/dev/tcp/$subnet.$((10 + i))/22" \
        2>/dev/null || ready=0
    done
    if [ "$ready" = 1 ] && command -v sinfo >/dev/null; then
      local idle
      idle="$(cmd_exec 1 timeout 5 sinfo -h -N -o %t 2>/dev/null | grep -c -E '^(idle|mix|alloc)' || true)"
      [ "$idle" = "$hosts" ] || ready=0
    fi
    [ "$ready" = 1 ] && return 0
    sleep 0.1
  done
  die "the hosts' services did not come up (logs in $dir)"
}

cmd_down() {
  local pids=()
  for f in "$dir"/node*/pid "$dir/switch.pid"; do
    alive "$f" && pids+=("$(cat "$f")")
    # unshare itself, which ends once the init it forked has.
    alive "$f.unshare" && pids+=("$(cat "$f.unshare")")
  done
  [ ${#pids[@]} -gt 0 ] && kill -9 "${pids[@]}" 2>/dev/null || true
  await_end "${pids[@]}"
  rm -rf "$dir"
}

cmd_exec() {
  local pid n
  pid="$(host_pid "$1")"
  n="$(host_number "$1")"
  shift
  [ $# -gt 0 ] || die "exec needs a command"
  nsenter -t "$pid" -n -u -m -p -- env TMPDIR="$dir/node$n/tmp" \
    bash -c 'cd "$1" && shift && exec "$@"' _ "$PWD" "$@"
}

cmd_link() {
  local n
  n="$(host_number "$1")"
  host_pid "$n" >/dev/null
  case "${2:-}" in
  up) in_switch ip link set "node$n" master br0 up ;;
  down) in_switch ip link set "node$n" down ;;
  silent) in_switch ip link set "node$n" nomaster ;;
  *) die "link needs up, down or silent" ;;
  esac
}

# Token-bucket shaping on both ends of the host's link; the bucket holds
# 10 ms at the rate, and at least two 64 KiB segments (veths offload).
cmd_rate() {
  local n pid rate="${2:-}"
  n="$(host_number "$1")"
  pid="$(host_pid "$n")"
  if [ "$rate" = off ]; then
    in_switch tc qdisc del dev "node$n" root 2>/dev/null || true
    nsenter -t "$pid" -n -- tc qdisc del dev eth0 root 2>/dev/null || true
    return
  fi
  [[ "$rate" =~ ^([0-9]+)(kbit|mbit|gbit)$ ]] ||
    die "rate must be like 100mbit, 1gbit or off, got \"$rate\""
  local scale=1000
  case "${BASH_REMATCH[2]}" in mbit) scale=1000000 ;; gbit) scale=1000000000 ;; esac
  local burst=$((BASH_REMATCH[1] * scale / 8 / 100))
  [ "$burst" -ge 131072 ] || burst=131072
  in_switch tc qdisc replace dev "node$n" root tbf rate "$rate" burst "$burst" latency 100ms
  nsenter -t "$pid" -n -- tc qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 100ms
}

cmd_kill() {
  local pid
  pid="$(host_pid "$1")"
  kill -9 "$pid"
  await_end "$pid"
}

cmd_hosts() {
  for f in "$dir"/node*/pid; do
    [ -f "$f" ] || continue
    local name
    name="$(basename "$(dirname "$f")")"
    if alive "$f"; then
      echo "$name $subnet.$((10 + ${name#node})) pid $(cat "$f")"
    else
      echo "$name down (killed)"
    fi
  done
}

case "${1:-}" in
up) cmd_up "${2:-}" ;;
down) cmd_down ;;
exec) shift && cmd_exec "$@" ;;
link) cmd_link "${2:-}" "${3:-}" ;;
rate) cmd_rate "${2:-}" "${3:-}" ;;
kill) cmd_kill "${2:-}" ;;
hosts) cmd_hosts ;;
__setup) host_setup "$2" ;;
*) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2 && exit 2 ;;
esac
