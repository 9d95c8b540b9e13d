"""Replays a few-shot stopping rule on record logs (`*.jsonl`, one line per trial, in
trial order): for every workload searched for 40 trials or more, the trial at which a
rule "the last WINDOW trials (whole batches of 8) improved the best by less than
WITHIN" would have stopped it, and its best by then as a share of the run's final best.

  python3 bench/replay_stop.py [--within 0.02] [--window 24] DIR_OR_FILE...
"""
import argparse
import collections
import glob
import json
import os

ap = argparse.ArgumentParser()
ap.add_argument("--within", type=float, default=0.02)
ap.add_argument("--window", type=int, default=24)
ap.add_argument("paths", nargs="+")
args = ap.parse_args()

files = []
for p in args.paths:
    files += sorted(glob.glob(os.path.join(p, "*.jsonl"))) if os.path.isdir(p) else [p]
runs, early, shares = 0, [], []
for f in files:
    curves = collections.OrderedDict()
    for line in open(f):
        r = json.loads(line)
        curves.setdefault(r["workload"], []).append(r.get("gflops") or 0)
    for w, g in curves.items():
        c, best = [], 0.0
        for x in g:
            best = max(best, x)
            c.append(best)
        n = len(c)
        if n < 40:
            continue
        runs += 1
        stop = next((t for t in range(16, n + 1, 8)
                     if t > args.window and c[t - 1] < c[t - 1 - args.window] * (1 + args.within)), n)
        share = c[stop - 1] / c[-1]
        if stop < n:
            early.append(n - stop)
            shares.append(share)
        print(f"{f}: {w}: {n} trials, stops at {stop}, best there {share:.3f} of the final")
print(f"# within {args.within}, window {args.window}: {runs} runs of 40+ trials, {len(early)} stopped early "
      f"({sum(early)} trials fewer), their best at {min(shares, default=1):.3f}-{max(shares, default=1):.3f} of the final")
