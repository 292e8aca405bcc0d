#!/usr/bin/env python3
"""Fit a topology's link constants to measured link patterns.

Runs tasp-replay (every pattern of the calibration files simulated as one
communication group) over the NVSwitch port capacity, the per-flow cap and
the device-side fixed costs of a group (a collective call's, and a grouped
send/receive's base plus its cost per message of the busiest GPU), by
coordinate descent on a grid from several starting points.  It minimises
the larger of the two median relative errors, each divided by its target
(10% for messages >= 4 MiB, 25% over all sizes), so the fit goes for the
target that is hardest to meet; then it writes the topology file with the
fitted constants.

The host cost of issuing a group (comm.host_us) is not fitted: an isolated
transfer only shows host + device cost together, so it is kept as the
topology states it (scripts/calibrate measures it apart) and the device
costs are fitted on top of it.

usage: scripts/fit_links.py TOPOLOGY.json CALIBRATION_DIR [--replay build/tasp-replay] [--write]
"""
import argparse
import glob
import json
import re
import subprocess
import sys

# fitted parameter -> (tasp-replay option, grid)
PARAMS = {
    "port": ("--port-gbps", [float(x) for x in range(200, 501, 5)]),
    "cap": ("--flow-cap-gbps", [float(x) for x in range(150, 501, 5)]),
    "launch": ("--launch-us", [float(x) for x in range(0, 201, 2)]),
    "p2p_launch": ("--p2p-launch-us", [float(x) for x in range(0, 201, 2)]),
    "p2p_msg": ("--p2p-msg-us", [float(x) for x in range(0, 61)]),
}


def errors(replay, topo, files, p, host_us):
    args = [replay, "--quiet", f"--host-us={host_us}"]
    args += [f"{PARAMS[k][0]}={v}" for k, v in p.items()]
    out = subprocess.run(args + [topo] + files, check=True, capture_output=True,
                         text=True).stdout
    m = re.search(r"([\d.]+)% for messages >= 4 MiB .*?([\d.]+)% over all", out)
    return float(m.group(1)), float(m.group(2))


TARGET_BIG, TARGET_ALL = 10.0, 25.0


def fit(replay, topo, files, host_us, rounds=3):
    """Coordinate descent from each start; returns (params, median >= 4 MiB
    %, median all %) of the best."""
    cache = {}

    def cost(q):
        key = tuple(sorted(q.items()))
        if key not in cache:
            big, every = errors(replay, topo, files, q, host_us)
            worst = max(big / TARGET_BIG, every / TARGET_ALL)
            cache[key] = (worst + 1e-4 * (big + every), big, every)
        return cache[key]

    best = None
    # starts differ in how the fixed cost of grouped send/receive splits
    # between its base and its cost per message, where descent gets stuck
    for msg in (0.0, 10.0, 20.0, 30.0):
        for launch in (0.0, 40.0):
            p = {"port": 330.0, "cap": 280.0, "launch": launch, "p2p_launch": 60.0,
                 "p2p_msg": msg}
            for _ in range(rounds):
                for name, (_, grid) in PARAMS.items():
                    p[name] = min(grid, key=lambda v: cost({**p, name: v})[0])
            if best is None or cost(p)[0] < cost(best)[0]:
                best = dict(p)
    _, big, every = cost(best)
    return best, big, every


def apply(t, p, big, every, what):
    """Write fitted link constants into topology dict t."""
    t["generator"]["port_gbps"] = p["port"]
    t["comm"].update({"flow_cap_gbps": p["cap"], "launch_us": p["launch"],
                      "p2p_launch_us": p["p2p_launch"], "p2p_msg_us": p["p2p_msg"]})
    t["sources"] = [s for s in t.get("sources", []) if not s.startswith("link constants")]
    t["sources"].insert(0, f"link constants fitted by scripts/fit_links.py to {what}: median "
                        f"|error| {big:.2f}% for messages >= 4 MiB, {every:.2f}% over all sizes")


def describe(p, big, every):
    return (f"port {p['port']:.0f} GB/s, per-flow cap {p['cap']:.0f} GB/s, collective launch "
            f"{p['launch']:.0f} us, grouped send/receive {p['p2p_launch']:.0f} us + "
            f"{p['p2p_msg']:.0f} us per message; median |error| {big:.2f}% (>= 4 MiB), "
            f"{every:.2f}% (all)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("topology")
    ap.add_argument("calibration")
    ap.add_argument("--replay", default="build/tasp-replay")
    ap.add_argument("--write", action="store_true", help="rewrite the topology file")
    a = ap.parse_args()
    files = sorted(glob.glob(f"{a.calibration}/links-n*.jsonl"))
    if not files:
        sys.exit(f"fit_links: no links-n*.jsonl in {a.calibration}")
    t = json.load(open(a.topology))
    host_us = t["comm"].get("host_us", 0)
    p, big, every = fit(a.replay, a.topology, files, host_us)
    print("fit: " + describe(p, big, every))
    if a.write:
        apply(t, p, big, every, f"{a.calibration}/links-n*.jsonl")
        with open(a.topology, "w") as f:
            json.dump(t, f, indent=1)
            f.write("\n")
        print(f"fit: wrote {a.topology}")


if __name__ == "__main__":
    main()
