#!/usr/bin/env python3
# One row of the delay sweeps' table (netem-cluster.sh, delay-cluster.sh) from the load
# generator's JSON:
#
#   sweep-row.py JSON DELAY POLICY OUT
#
# prints "DELAY POLICY forwarded hitRate mean p50 p99 busiest cpu relay", busiest being the
# largest share of the answered requests that one node served ("-" without the per-node rows),
# cpu and relay the CPU time of the node processes and of the relays per measured request in ms
# ("-" without a figure: no relays, or no /proc); a run that failed (no JSON, or no
# figures: nothing answered) prints a row saying FAILED with the reason and OUT (the load
# generator's output file) and exits with status 1.
import json
import sys

path, delay, policy, out = sys.argv[1:5]
head = "%-8s %-11s" % (delay, policy)
try:
    with open(path) as f:
        r = json.load(f)
    l = r["latency_ms"]
    figures = [r["forwarded_share"], r["hit_rate"], l["mean"], l["p50"], l["p99"]]
    if any(not isinstance(v, (int, float)) for v in figures):
        raise ValueError("%s of %s requests answered, no figures" % (r.get("answered"),
                                                                  r.get("requests")))
except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
    print("%s FAILED: %s (see %s)" % (head, e, out))
    sys.exit(1)
served = [n.get("served") for n in r.get("nodes") or []]
if served and all(isinstance(v, int) for v in served) and r.get("answered"):
    busiest = "%8.3f" % (max(served) / r["answered"])
else:
    busiest = "%8s" % "-"
cpu = r.get("cpu_ms_per_request") or {}
cpu_cells = ["%10.2f" % cpu[g] if isinstance(cpu.get(g), (int, float)) else "%10s" % "-"
             for g in ("nodes", "relays")]
print("%s %9.3f %8.3f %9.1f %9.1f %9.1f %s %s %s" % (head, *figures, busiest, *cpu_cells))
