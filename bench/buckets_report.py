"""The table of a bench/buckets.sh log (docs/performance.md, issue 18).
  python3 bench/buckets_report.py bench/results/buckets-<time>.log
"""
import re
import sys

text = open(sys.argv[1]).read()
peers = {}  # M -> {peer: gflops}
for m in re.finditer(r"RESULT gemm peer=(\S+) threads=1 M=(\d+) N=1024 K=1024 gflops_med=([\d.]+)", text):
    peers.setdefault(int(m.group(2)), {})[m.group(1).split("-0")[0]] = float(m.group(3))
peak = float(re.search(r"per_core=([\d.]+)", text).group(1))
header = re.search(r"# GEMM, GFLOP/s: shape (.*)", text).group(1).split()
names = sorted({p for ps in peers.values() for p in ps})
print(f"FMA peak {peak} GFLOP/s (1 thread), N = K = 1024\n")
ours_names = header
print("| M | " + " | ".join(header + names) + " | " + " | ".join(f"{h} / best peer" for h in ours_names) + " |")
print("|---" * (1 + 2 * len(header) + len(names)) + "|")
ratios = {h: [] for h in ours_names}
for line in text.splitlines():
    f = line.split()
    if not f or f[0] != "autotune":
        continue
    m = int(f[1].split("x")[0])
    ours = [float(x) for x in f[2:]]
    ps = peers.get(m, {})
    best = max(ps.values())
    cells = [f"{x:.1f}" for x in ours] + [f"{ps.get(p, float('nan')):.1f}" for p in names]
    for h, x in zip(ours_names, ours):
        ratios[h].append(x / best)
    print(f"| {m} | " + " | ".join(cells) + " | " + " | ".join(f"{x / best:.2f}×" for x in ours) + " |")
print()
for h, r in ratios.items():
    r = sorted(r)
    print(f"{h}: median {r[len(r) // 2]:.2f}× the best peer, {r[0]:.2f}–{r[-1]:.2f}×")
