#!/usr/bin/env bash
# Runs one multi-host scenario on a namespace cluster of its own
# (scripts/cluster.sh), printing what the lit test checks.
#
#   scenario.sh SCENARIO WORKDIR
#
# The cluster is taken down on every exit. plan-opt and plan-run come from
# PATH.
set -uo pipefail
scenario="$1"
work="$2"
here="$(cd "$(dirname "$0")" && pwd)"
inputs="$here/Inputs"
examples="$here/../../examples"
runtime_tests="$here/../Runtime"
cluster="$here/../../scripts/cluster.sh"
python=/usr/bin/python3
plan_run="$(command -v plan-run)"
export PARTITA_CLUSTER_DIR="$work/cluster"

rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
trap '"$cluster" down' EXIT

# Every command of a scenario ends within `limit` seconds (then it is ended
# with all it started in its process group, and the scenario says so): a
# hang fails the test instead of holding the suite.
limit=240
bounded() {
  timeout -k 10 "$limit" "$@"
  local status=$?
  [ "$status" = 124 ] && echo "scenario.sh: \"$*\" did not end within $limit s" >&2
  return "$status"
}

on() { bounded "$cluster" exec "$@"; }

# Plans the b12 tiny Llama for `topology` (2x2 or 3x2) with `strategy`.
plan() {
  plan-opt "$inputs/tiny-llama-b12.json" --topology="$inputs/cpu-$2.json" \
    --no-search --strategy="$3" "${@:4}" -o "$1" 2>/dev/null
}

hostfile() {
  : >"$1"
  for i in $(seq "$2"); do echo "node$i slots=2" >>"$1"; done
}

# The processes of the job left on each host (ranks, mpirun's daemons,
# Slurm's step daemons) once they had 15 s to end.
leftovers() {
  local host left
  for host in "$@"; do
    for _ in $(seq 30); do
      left="$(on "$host" ps -e -o comm= 2>/dev/null |
        grep -x -E 'plan-run|orted|mpirun|slurmstepd' | sort | uniq -c |
        tr -s ' ' | tr '\n' ' ')"
      [ -z "$left" ] && break
      sleep 0.5
    done
    echo "$host leftovers: ${left:-none}"
  done
}

# Runs `cmd...` in the background until it ends, logging to `log`; runs
# `event` (a function) once `steplog` holds `after` steps; prints the
# job's exit status, and whether it ended within `limit` seconds of the
# event.
during_run() {
  local log="$1" steplog="$2" after="$3" event="$4" limit="$5"
  shift 5
  "$@" >"$log" 2>&1 &
  local job=$!
  for _ in $(seq 600); do
    [ -f "$steplog" ] && [ "$(wc -l <"$steplog")" -ge "$after" ] && break
    sleep 0.1
  done
  local t0
  t0="$(date +%s.%N)"
  "$event"
  wait "$job"
  local status=$?
  echo "status $status"
  local took
  took="$($python -c "import time; print(round(time.time() - $t0, 1))")"
  if $python -c "import sys; sys.exit(not $took <= $limit)"; then
    echo "ended within $limit s of the event"
  else
    echo "ended $took s after the event, past $limit s"
  fi
}

# What plan-run said of the failure: the ranks' and the launcher's lines.
failure_lines() {
  grep -E '^plan-run: (rank [0-9]+:|the job failed|mpirun has not)' "$1" |
    sort -u
}

# Runs `srun ARGS...` on node1 into OUT, once more if its ranks crashed
# inside MPI_Init, before any step: Open MPI 4.1's TCP transport can, on an
# overloaded machine (docs/cluster.md), and what a test checks begins
# after MPI_Init. Returns srun's status.
srun_job() {
  local out="$1" status=0
  shift
  for attempt in 1 2; do
    on node1 srun "$@" >"$out" 2>&1
    status=$?
    if [ "$status" = 0 ] || grep -q '^step 1 ' "$out" ||
      ! grep -q 'Segmentation fault' "$out"; then
      break
    fi
    mv "$out" "$out.crashed-$attempt"
    echo "scenario.sh: srun's ranks crashed inside MPI_Init (attempt $attempt, $out.crashed-$attempt)" >&2
  done
  return "$status"
}

cut_node2() { "$cluster" link node2 down; }
silence_node2() { "$cluster" link node2 silent; }
kill_node2() { "$cluster" kill node2; }
flap_node2() {
  "$cluster" link node2 down
  sleep 2
  "$cluster" link node2 up
}

compare() {
  "$python" "$runtime_tests/same_losses.py" \
    --rtol "${3:-2e-6}" "$1" "$2"
}

case "$scenario" in
script)
  bounded "$cluster" up 2 || exit 1
  on node1 hostname
  on 2 hostname
  on node1 ssh node2 hostname
  on node2 ip -4 -o addr show dev eth0 | awk '{print "node2 address", $4}'
  on node1 sinfo -h -N -o '%N %t'
  before="$("$cluster" hosts)"
  bounded "$cluster" up 2 && [ "$("$cluster" hosts)" = "$before" ] &&
    echo "up again: the same hosts"
  "$cluster" link node2 down
  on node1 ssh -o ConnectTimeout=2 node2 true 2>/dev/null ||
    echo "node2 cut off"
  "$cluster" link node2 up
  on node1 ssh node2 true && echo "node2 back"
  "$cluster" rate node2 1mbit
  on node1 bash -c 'head -c 1000000 /dev/zero | ssh node2 "cat > /dev/null"' &&
    echo "1 MB sent at 1 Mbit/s"
  "$cluster" rate node2 off
  "$cluster" kill node2
  "$cluster" hosts | grep node2
  bounded "$cluster" up 2 && on node1 ssh node2 hostname
  "$cluster" down
  [ -e "$PARTITA_CLUSTER_DIR" ] || echo "down: no files left"
  pgrep -f "$PARTITA_CLUSTER_DIR" >/dev/null || echo "down: no processes left"
  ;;
equivalence)
  bounded "$cluster" up 3 || exit 1
  hostfile hosts2 2
  for s in dp=2,tp=2 pp=2,dp=2 dp=4,zero=3; do
    plan "p-$s.json" 2x2 "$s"
    bounded plan-run "p-$s.json" --steps 3 --log-json "one-$s.log" >/dev/null 2>&1
    on node1 plan-run "p-$s.json" --hostfile hosts2 --steps 3 \
      --log-json "two-$s.log" >/dev/null 2>&1
    echo "$s: $(compare "one-$s.log" "two-$s.log" | tail -1)"
  done
  # bf16 reductions round as they combine: hosts' order may differ.
  plan bf16.json 2x2 dp=2,tp=2 --dtype=bf16
  bounded plan-run bf16.json --steps 3 --log-json one-bf16.log >/dev/null 2>&1
  on node1 plan-run bf16.json --hostfile hosts2 --steps 3 \
    --log-json two-bf16.log >/dev/null 2>&1
  echo "bf16: $(compare one-bf16.log two-bf16.log 1e-3 | tail -1)"
  for s in dp=3,tp=2 pp=2,dp=3; do
    plan "p-$s.json" 3x2 "$s"
    bounded plan-run "p-$s.json" --steps 3 --log-json "one-$s.log" >/dev/null 2>&1
    srun_job "srun-$s.out" -N3 -n6 --ntasks-per-node=2 --mpi=pmix \
      "$plan_run" "p-$s.json" --steps 3 --log-json "three-$s.log"
    grep -o 'ranks 0-1 on node1, 2-3 on node2, 4-5 on node3' "srun-$s.out"
    echo "srun $s: $(compare "one-$s.log" "three-$s.log" | tail -1)"
  done
  ;;
kill-host | link-down | link-silent)
  # A host that dies, or whose link goes down (its carrier lost, or silent
  # past the host) and stays down: the job ends
  # by itself within the collective timeout (10 s), the ranks' probe (3 s)
  # and the launcher's grace for mpirun (10 s), with the host, ranks and step named, and no
  # process of the job left on either host.
  bounded "$cluster" up 2 || exit 1
  hostfile hosts2 2
  plan p.json 2x2 dp=2,tp=2
  case "$scenario" in
  kill-host) event=kill_node2 ;;
  link-down) event=cut_node2 ;;
  link-silent) event=silence_node2 ;;
  esac
  during_run run.out steps.log 20 "$event" 45 \
    on node1 plan-run p.json --hostfile hosts2 --steps 100000 \
    --collective-timeout 10 --log-json steps.log
  failure_lines run.out
  if [ "$scenario" = kill-host ]; then leftovers node1; else leftovers node1 node2; fi
  ;;
link-down-srun)
  # The same under Slurm: srun ends the step, the cut-off host's ranks
  # end on their own, and no node is drained.
  bounded "$cluster" up 2 || exit 1
  plan p.json 2x2 dp=2,tp=2
  during_run run.out steps.log 20 cut_node2 45 \
    on node1 srun -N2 -n4 --ntasks-per-node=2 --mpi=pmix "$plan_run" p.json \
    --steps 100000 --collective-timeout 10 --log-json steps.log
  failure_lines run.out
  sleep 2
  on node2 ps -e -o comm= | grep -c -x plan-run | sed 's/^/node2 ranks left: /'
  on node1 sinfo -h -N -o '%N %T' | grep -c -i drain | sed 's/^/drained nodes: /'
  ;;
rank-dies-srun)
  # A rank killed under srun: the step ends, and its node is not drained.
  bounded "$cluster" up 2 || exit 1
  plan p.json 2x2 dp=2,tp=2
  "$python" "$runtime_tests/kill_rank.py" 3 5 "$work/p.json" \
    "$cluster" exec node1 srun -N2 -n4 --ntasks-per-node=2 --mpi=pmix \
    "$plan_run" "$work/p.json" --steps 100000 --collective-timeout 10 |
    grep -E '^kill_rank: (killed|the job)'
  leftovers node1 node2
  on node1 sinfo -h -N -o '%N %T'
  ;;
link-flap)
  # A link that comes back within the collective timeout: the job goes on
  # with the losses of a run that lost nothing.
  bounded "$cluster" up 2 || exit 1
  hostfile hosts2 2
  plan p.json 2x2 dp=2,tp=2
  bounded plan-run p.json --steps 60 --log-json one.log >/dev/null 2>&1
  during_run run.out steps.log 10 flap_node2 600 \
    on node1 plan-run p.json --hostfile hosts2 --steps 60 \
    --collective-timeout 15 --log-json steps.log
  compare one.log steps.log | tail -1
  ;;
restart)
  # --max-restarts across hosts: a rank on node2 killed mid-run, the job
  # restarts from the newest checkpoint and ends with the unfailed losses.
  bounded "$cluster" up 2 || exit 1
  hostfile hosts2 2
  plan p.json 2x2 dp=2,tp=2
  bounded plan-run p.json --steps 12 --log-json unfailed.log >/dev/null 2>&1
  "$python" "$runtime_tests/kill_rank.py" 2 3 "$work/p.json" \
    "$cluster" exec node1 plan-run "$work/p.json" --hostfile hosts2 --steps 12 \
    --checkpoint-dir ck --checkpoint-every 2 --max-restarts 1 \
    --log-json restarted.log |
    grep -E '^kill_rank: (killed|the job)|^plan-run: (the job failed|resumed)'
  compare unfailed.log restarted.log | tail -1
  ;;
reshard)
  # A checkpoint written on 2 hosts (dp=2, tp=2) resumes on 3 (dp=3, tp=2,
  # under srun), resharded, with the losses of one run on one host.
  bounded "$cluster" up 3 || exit 1
  hostfile hosts2 2
  plan two.json 2x2 dp=2,tp=2
  plan three.json 3x2 dp=3,tp=2
  bounded plan-run two.json --steps 6 --log-json whole.log >/dev/null 2>&1
  on node1 plan-run two.json --hostfile hosts2 --steps 4 \
    --checkpoint-dir ck --checkpoint-every 2 --log-json first.log \
    >/dev/null 2>&1
  srun_job second.out -N3 -n6 --ntasks-per-node=2 --mpi=pmix "$plan_run" \
    three.json --steps 6 --checkpoint-dir ck --resume --log-json second.log
  grep -E '^plan-run: resumed' second.out
  cat first.log second.log >both.log
  compare whole.log both.log | tail -1
  ;;
bandwidth)
  # The links measured (hosts limited to 20 Mbit/s), written as a topology
  # plan-opt plans for; and a hostfile that splits a node's group refused.
  bounded "$cluster" up 2 || exit 1
  hostfile hosts2 2
  "$cluster" rate node1 20mbit
  "$cluster" rate node2 20mbit
  on node1 plan-run --bandwidth-test --hostfile hosts2 --max-size 1M \
    --write-topology measured.json >bandwidth.out 2>&1
  echo "status $?"
  grep -E '^# (device:|(all_reduce|all_gather|reduce_scatter|all_to_all|send/recv) )' \
    bandwidth.out
  "$python" - measured.json <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
rate = t["inter_node"]["gbits_per_s"]
print("nodes", t["nodes"], "devices_per_node", t["devices_per_node"])
device, calibration = t["device"], t["calibration"]
print("device", device["kind"], "measured:",
      device["fp32_tflops"] > 0 and device["hbm_gbytes_per_s"] > 0)
print("calibration", sorted(calibration), "collective_efficiency",
      calibration["collective_efficiency"])
# TCP over a token bucket gets less than the rate, never more.
print("across hosts", "within 0.3x-1.05x of 20 Mbit/s"
      if 0.3 * 0.02 <= rate <= 1.05 * 0.02 else f"{rate} Gbit/s")
print("inside a host faster:", t["intra_node"]["gbytes_per_s"] * 8 > rate)
EOF
  plan-opt "$inputs/tiny-llama-b12.json" --topology=measured.json \
    -o measured-plan.json 2>&1 | grep -E '^plan for'
  plan-opt "$examples/models/tiny-llama.json" --topology=cpu:4 --no-search \
    --strategy=dp=4 -o one-node.json 2>/dev/null
  on node1 plan-run one-node.json --hostfile hosts2 --steps 1 2>&1 |
    grep -E '^plan-run: error'
  on node1 plan-run one-node.json --hostfile hosts2 --steps 1 \
    --allow-split-groups 2>&1 | grep -E '^step 1 '
  ;;
*)
  echo "scenario.sh: no scenario \"$scenario\"" >&2
  exit 2
  ;;
esac
# What the test checks is what was printed: a check that finds nothing
# (grep -c) must not fail the script.
exit 0
