#!/usr/bin/env python3
"""Checks what a harness run recorded about its hosts (docs/hdf5-layout.md, layout 3), through the one reader
(scripts/dfccl_results.py) and the -J file: the root attributes `hosts` (one line per rank) and `nhosts`, each dfccl
backend's ring hops (a hop is `network` exactly when its two ranks are on different hosts, else `shared_memory`),
and the same in the JSON document.
Usage: hosts_check.py FILE.h5 FILE.json HOST_OF_RANK0,HOST_OF_RANK1,...   (a host given as * matches any one name,
the same for every rank that gives *)"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import dfccl_results as dr  # noqa: E402


def check(cond, what):
    if not cond:
        print(f"hosts_check: FAILED: {what}", file=sys.stderr)
        sys.exit(1)


def main(h5, js, expected):
    hosts = dr.rank_hosts(h5)
    check(len(hosts) == len(expected), f"hosts {hosts}: expected {len(expected)} ranks")
    star = {h for h, e in zip(hosts, expected) if e == "*"}
    check(len(star) <= 1, f"ranks given as * are on several hosts: {star}")
    check(all(e in ("*", h) for h, e in zip(hosts, expected)), f"hosts {hosts}, expected {expected}")
    nhosts = len(set(hosts))
    summary = dr.summary(h5)
    check((summary["nhosts"] == nhosts).all(), f"nhosts {set(summary['nhosts'])}, expected {nhosts}")
    hops = dr.hops(h5)
    check(len(hops) > 0, "no ring hops recorded")
    for b, rows in hops.groupby("backend"):
        world = rows[rows["group"] == "world"]
        n = len(hosts)
        check(sorted(world["rank"]) == list(range(n)), f"{b}: world hops from ranks {sorted(world['rank'])}")
        check(all(world["peer"] == (world["rank"] + 1) % n), f"{b}: world ring peers {list(world['peer'])}")
    for _, h in hops.iterrows():
        check(h["host"] == hosts[h["rank"]] and h["peer_host"] == hosts[h["peer"]], f"hop hosts {dict(h)}")
        want = "network" if h["host"] != h["peer_host"] else "shared_memory"
        check(h["transport"] == want, f"{h['backend']} {h['group']} hop {h['rank']}->{h['peer']} "
              f"({h['host']} -> {h['peer_host']}) through {h['transport']}, expected {want}")
    with open(js) as f:
        doc = json.load(f)
    check(doc["nhosts"] == nhosts and doc["rank_hosts"] == hosts, f"JSON hosts {doc['rank_hosts']}")
    jhops = [(b["backend"], x["group"], x["rank"], x["peer"], x["transport"]) for b in doc["backends"]
             for x in b.get("hops", [])]
    hhops = list(zip(hops["backend"], hops["group"], hops["rank"], hops["peer"], hops["transport"]))
    check(sorted(jhops) == sorted(hhops), f"JSON hops {jhops} differ from the file's {hhops}")
    counts = hops.groupby("transport").size().to_dict()
    print(f"hosts_check: {h5}: {nhosts} host(s) {sorted(set(hosts))}, hops {counts}: OK")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3].split(","))
