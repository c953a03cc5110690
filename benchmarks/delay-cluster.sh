#!/usr/bin/env bash
# Four routing nodes on loopback with a delaying TCP relay in front of each node's peer port,
# driven by the load generator with the cost-aware and the local-only policy for each delay.
#
#   benchmarks/delay-cluster.sh [--delays "0 1 5 20 100"] [--requests 300] [--warmup 100]
#       [--mmlu DIR] [--zipf S]
#
# Needs no root and no netem. Node i listens for peers on 127.0.0.1:17000+i and advertises its
# relay, 127.0.0.1:17100+i, which passes each chunk on to the node's peer port the delay later
# (DelayRelayMain); the seeds are the relays. So every node-to-node message crosses one relay
# each way: a round trip is twice the delay, as netem on every node's egress gives. The load
# generator talks to the client ports, 127.0.0.1:18000+i, directly (no delay). A delay of
# "direct" runs without relays, the nodes advertising their own peer ports. The table's last two
# columns are the CPU time the node processes and the relays spent per measured request.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
jar="$here/target/benchmarks.jar"
source "$here/sweep-lib.sh"
sweep_flags 2,13 "$@"
for d in $delays; do
  [[ "$d" == direct || "$d" =~ ^[0-9]+(\.[0-9]+)?$ ]] \
    || { echo "--delays: '$d' is not a delay in ms (or direct)" >&2; exit 2; }
done
"$here/run" load --help >/dev/null   # builds the jar if needed

nodes=4
peer_base=17000
relay_base=17100
client_base=18000
for i in $(seq 0 $((nodes - 1))); do
  for port in $((peer_base + i)) $((relay_base + i)) $((client_base + i)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "port $port on 127.0.0.1 is in use; the cluster needs 17000-17003, 17100-17103 and" \
        "18000-18003" >&2
      exit 1
    fi
  done
done
work="$(mktemp -d)"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/cluster.key"

stop_all() {
  local pids
  pids=$(cat "$work"/*.pid 2>/dev/null || true)
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  for pid in $pids; do wait "$pid" 2>/dev/null || true; done
  rm -f "$work"/*.pid
}
trap stop_all EXIT

relays_listen=""; relays_target=""; endpoints=""
for i in $(seq 0 $((nodes - 1))); do
  relays_listen+="${relays_listen:+,}127.0.0.1:$((relay_base + i))"
  relays_target+="${relays_target:+,}127.0.0.1:$((peer_base + i))"
  endpoints+="${endpoints:+,}127.0.0.1:$((client_base + i))"
done

sweep_header
for d in $delays; do
  for policy in cost-aware local-only; do
    label="$d"; [[ "$d" == direct ]] || label="${d}ms"
    seeds=""
    if [[ "$d" != direct ]]; then
      java -Xmx64m -cp "$jar" io.github.prefixrouter.bench.netdelay.DelayRelayMain \
        --listen "$relays_listen" --target "$relays_target" --delay-ms "$d" \
        > "$work/relay-$d-$policy.log" 2>&1 &
      echo $! > "$work/relay.pid"
      for _ in $(seq 1 100); do
        grep -q '^ready$' "$work/relay-$d-$policy.log" && break
        kill -0 "$(cat "$work/relay.pid")" 2>/dev/null || break
        sleep 0.1
      done
      if ! grep -q '^ready$' "$work/relay-$d-$policy.log"; then
        # without its relays the run would measure no delay (local-only would even pass)
        printf "%-8s %-11s FAILED: the relays did not start (see %s)\n" "$label" "$policy" \
          "$work/relay-$d-$policy.log"
        failed+=("$label $policy")
        stop_all
        continue
      fi
    fi
    for i in $(seq 0 $((nodes - 1))); do
      port=$((peer_base + i)); [[ "$d" == direct ]] || port=$((relay_base + i))
      seeds+="${seeds:+,}n$i@127.0.0.1:$port"
    done
    for i in $(seq 0 $((nodes - 1))); do
      advertise=()
      [[ "$d" == direct ]] || advertise=(--advertise "127.0.0.1:$((relay_base + i))")
      java -Xmx512m -cp "$jar" io.github.prefixrouter.server.NodeMain \
        --id "n$i" --listen "127.0.0.1:$((peer_base + i))" ${advertise[@]+"${advertise[@]}"} \
        --client "127.0.0.1:$((client_base + i))" \
        --seeds "$seeds" --cluster-key-file "$work/cluster.key" --engine reference \
        --engine-cache-tokens 8192 --policy "$policy" > "$work/n$i-$d-$policy.log" 2>&1 &
      echo $! > "$work/n$i.pid"
    done
    sleep 8   # JVM start and membership
    cpu=(--node-pids "$(pid_list "$work"/n*.pid)")
    [[ "$d" == direct ]] || cpu+=(--relay-pids "$(pid_list "$work/relay.pid")")
    java -cp "$jar" io.github.prefixrouter.load.LoadGeneratorMain --nodes "$endpoints" \
      --requests "$requests" --warmup "$warmup" --concurrency 4 --json "$work/$d-$policy.json" ${extra[@]+"${extra[@]}"} \
      "${cpu[@]}" > "$work/$d-$policy.out" 2>&1 || true
    stop_all
    sweep_row "$work/$d-$policy.json" "$label" "$policy" "$work/$d-$policy.out"
  done
done
sweep_end "$work"
