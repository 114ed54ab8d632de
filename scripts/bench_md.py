#!/usr/bin/env python3
"""Runs `xconv bench --json` for some dtypes and prints BENCHMARKS.md's tables.

    python3 scripts/bench_md.py --xconv build/xconv --dtype f32,bf16,i8 [--extra ARGS]

One table per dtype: xconv GFLOP/s and engine, every peer configuration, the best peer,
ratio = xconv / best peer, the output check; then the geometric mean of the ratios over the
entries a peer ran. Before each dtype it waits (up to --wait seconds) for the 1-minute load
average to fall under --max-load, because the peers' thread pools collapse on a shared core;
the load at the start of each run is printed under its table.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time


def wait_quiet(max_load, wait):
    t0 = time.time()
    while os.getloadavg()[0] > max_load and time.time() - t0 < wait:
        time.sleep(5)
    return os.getloadavg()[0]


def fmt(v):
    if v is None:
        return "-"
    return f"{v:.1f}" if v >= 1 else f"{v:.3f}"


def table(rows):
    peers = []
    for r in rows:
        for p in list(r.get("peers", {})) + list(r.get("unsupported", {})):
            if p not in peers:
                peers.append(p)
    out = ["| entry | op | xconv GFLOP/s | % peak | engine | " + " | ".join(peers) +
           " | best peer | ratio | check (max err) |",
           "|---|---|---:|---:|---|" + "---:|" * len(peers) + "---|---:|---|"]
    ratios = []
    for r in rows:
        cells = [fmt(r.get("peers", {}).get(p)) for p in peers]
        ratio = r.get("ratio")
        if ratio:
            ratios.append(ratio)
        chk = r.get("check")
        check = "-" if not chk else ("ok " if chk.get("ok") else "MISMATCH ") + f"{chk.get('max_rel_err', 0):.1e}"
        out.append(f"| {r['name']} | {r['op']} | {fmt(r['xconv_gflops'])} | {r.get('pct_peak', 0):.1f} | "
                   f"{r['engine']} | " + " | ".join(cells) +
                   f" | {r.get('best_peer') or '-'} | {ratio if ratio else '-'} | {check} |")
    if ratios:
        gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        out.append("")
        out.append(f"Geometric mean of xconv / best peer: **{gm:.3f}** over {len(ratios)} entries; "
                   f"lowest {min(ratios):.3f}, highest {max(ratios):.3f}.")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--xconv", default="build/xconv")
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--max-load", type=float, default=0.5)
    ap.add_argument("--wait", type=float, default=120)
    ap.add_argument("--extra", default="")
    a = ap.parse_args()
    for dt in a.dtype.split(","):
        load = wait_quiet(a.max_load, a.wait)
        cmd = [a.xconv, "bench", "--dtype", dt, "--json"] + a.extra.split()
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode not in (0, 1):
            sys.stderr.write(res.stderr)
            sys.exit(res.returncode)
        rows = json.loads(res.stdout)
        peak = rows[0].get("peak_gflops") if rows else None
        print(f"### {dt}\n")
        print(table(rows))
        print(f"\n(load average {load:.2f} at the start; FMA peak measured {peak} GFLOP/s)\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
