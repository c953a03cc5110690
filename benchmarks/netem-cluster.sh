#!/usr/bin/env bash
# Four routing nodes in separate network namespaces with netem delay on their links, driven by
# the load generator with the cost-aware and the local-only policy for each delay.
#
#   sudo benchmarks/netem-cluster.sh [--delays "0 1 5 20 100"] [--requests 300] [--warmup 100]
#       [--mmlu DIR] [--zipf S]
#
# Needs root, iproute2 and the sch_netem kernel module. Creates namespaces pr-n0..pr-n3 and a
# bridge pr-br0 (10.77.0.254/24 in the root namespace); removes them on exit. Delays are one
# way, on every node's egress, so a node-to-node round trip is twice the delay. The table's
# "cpu ms/req" is the CPU time the node processes spent per measured request (no relays here).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
jar="$here/target/benchmarks.jar"
source "$here/sweep-lib.sh"
sweep_flags 2,11 "$@"
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces)" >&2; exit 1; }
"$here/run" load --help >/dev/null   # builds the jar if needed

nodes=4
work="$(mktemp -d)"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/cluster.key"

cleanup() {
  for pid in $(cat "$work"/*.pid 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  sleep 1
  for i in $(seq 0 $((nodes - 1))); do ip netns del "pr-n$i" 2>/dev/null || true; done
  ip link del pr-br0 2>/dev/null || true
}
trap cleanup EXIT

ip link add pr-br0 type bridge
ip addr add 10.77.0.254/24 dev pr-br0
ip link set pr-br0 up
for i in $(seq 0 $((nodes - 1))); do
  ip netns add "pr-n$i"
  ip link add "pr-v$i" type veth peer name "pr-p$i"
  ip link set "pr-v$i" netns "pr-n$i"
  ip link set "pr-p$i" master pr-br0 up
  ip -n "pr-n$i" addr add "10.77.0.$((i + 1))/24" dev "pr-v$i"
  ip -n "pr-n$i" link set "pr-v$i" up
  ip -n "pr-n$i" link set lo up
  if ! ip netns exec "pr-n$i" tc qdisc add dev "pr-v$i" root netem delay 0ms 2>/dev/null; then
    echo "the kernel has no sch_netem module (modprobe sch_netem); cannot add delay" >&2
    exit 1
  fi
done

seeds=""
for i in $(seq 0 $((nodes - 1))); do seeds+="${seeds:+,}n$i@10.77.0.$((i + 1)):7000"; done
endpoints=""
for i in $(seq 0 $((nodes - 1))); do endpoints+="${endpoints:+,}10.77.0.$((i + 1)):8000"; done

sweep_header
for d in $delays; do
  for i in $(seq 0 $((nodes - 1))); do
    ip netns exec "pr-n$i" tc qdisc change dev "pr-v$i" root netem delay "${d}ms"
  done
  for policy in cost-aware local-only; do
    for i in $(seq 0 $((nodes - 1))); do
      ip netns exec "pr-n$i" java -Xmx512m -cp "$jar" io.github.prefixrouter.server.NodeMain \
        --id "n$i" --listen "10.77.0.$((i + 1)):7000" --client "10.77.0.$((i + 1)):8000" \
        --seeds "$seeds" --cluster-key-file "$work/cluster.key" --engine reference \
        --engine-cache-tokens 8192 --policy "$policy" > "$work/n$i-$d-$policy.log" 2>&1 &
      echo $! > "$work/n$i.pid"
    done
    sleep 8   # JVM start and membership
    # ip netns exec replaces itself with java (exec, no fork): the pids are the nodes' JVMs
    java -cp "$jar" io.github.prefixrouter.load.LoadGeneratorMain --nodes "$endpoints" \
      --requests "$requests" --warmup "$warmup" --concurrency 4 --json "$work/$d-$policy.json" ${extra[@]+"${extra[@]}"} \
      --node-pids "$(pid_list "$work"/n*.pid)" > "$work/$d-$policy.out" 2>&1 || true
    for pid in $(cat "$work"/*.pid); do kill "$pid" 2>/dev/null || true; done
    sleep 3
    rm -f "$work"/*.pid
    # a run that failed (no JSON, or no figures: nothing answered) is a row saying so, and the
    # sweep goes on; it used to end the whole sweep (set -e) with a Python traceback
    sweep_row "$work/$d-$policy.json" "${d}ms" "$policy" "$work/$d-$policy.out"
  done
done
sweep_end "$work"
