# The delay sweeps' shared parts, sourced by netem-cluster.sh and delay-cluster.sh: their flags,
# and the table they print (a row per run, a FAILED row for a run that failed, and at the end
# the failed runs named and exit status 1 if there were any).

# sweep_flags USAGE_LINES ARGS...: sets delays, requests, warmup and extra (the load generator's
# extra flags); an unknown flag prints lines USAGE_LINES (a sed range) of the script and exits
# with 2
sweep_flags() {
  local usage="$1"
  shift
  delays="0 1 5 20 100"
  requests=300
  warmup=100
  extra=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --delays) delays="$2"; shift 2 ;;
      --requests) requests="$2"; shift 2 ;;
      --warmup) warmup="$2"; shift 2 ;;
      --mmlu) extra+=(--mmlu "$2"); shift 2 ;;
      --zipf) extra+=(--zipf "$2"); shift 2 ;;
      *) sed -n "${usage}p" "$0" >&2; exit 2 ;;
    esac
  done
  failed=()
}

# the columns: forwarded share, hit rate, latency, the busiest node's share of the answers, and
# the CPU time (user and system) per measured request of the node processes and of the relays,
# "-" where there is none (no relays, or no /proc: the load generator's output says why)
sweep_header() {
  printf "%-8s %-11s %9s %8s %9s %9s %9s %8s %10s %10s\n" "delay" "policy" "forwarded" "hitRate" \
    "mean ms" "p50 ms" "p99 ms" "busiest" "cpu ms/req" "relay cpu"
}

# pid_list FILE...: the process ids in the files, comma-separated (the load generator's
# --node-pids and --relay-pids)
pid_list() {
  cat "$@" | paste -sd, -
}

# sweep_row JSON DELAY POLICY OUT: the run's row; a run that failed (no JSON, or no figures:
# nothing answered) is a row saying so, and the sweep goes on
sweep_row() {
  python3 "$here/sweep-row.py" "$@" || failed+=("$2 $3")
}

# sweep_end WORK: where the logs are; exits with 1 naming the failed runs, if any
sweep_end() {
  echo "logs and JSON in $1"
  if [[ ${#failed[@]} -gt 0 ]]; then
    echo "failed runs: ${failed[*]}" >&2
    exit 1
  fi
}
