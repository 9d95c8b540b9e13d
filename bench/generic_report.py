"""Tables of a bench/generic.sh log (docs/performance.md, issue 18).
  python3 bench/generic_report.py bench/results/generic-<time>.log
"""
import re
import statistics
import sys

text = open(sys.argv[1]).read()
peers = {}  # (kind, shape) -> {peer: gflops}
for m in re.finditer(r"RESULT (gemm|conv) peer=(\S+) threads=1 (.*?) gflops_med=([\d.]+)", text):
    kind, peer, dims, g = m.group(1), m.group(2).split("-0")[0], m.group(3), float(m.group(4))
    d = dict(kv.split("=") for kv in dims.split())
    shape = f"{d['M']}x{d['N']}x{d['K']}" if kind == "gemm" else f"{d['C']},{d['H']},{d['K']}"
    peers.setdefault((kind, shape), {})[peer] = g
peak = float(re.search(r"per_core=([\d.]+)", text).group(1))
section = None
rows = {"gemm": [], "conv": []}
spec = {"gemm": [], "conv": []}
bucketed = {}  # conv shape -> GFLOP/s with bench/ops.rs's declared bucket
for line in text.splitlines():
    if line.startswith("# GEMM, "):
        section = "gemm"
    elif line.startswith("# conv 3x3, "):
        section = "conv"
    elif line.startswith("# conv 3x3 at"):
        section = "conv-spec"
    elif line.startswith("# GEMM at"):
        section = "gemm-spec"
    f = line.split()
    if f and f[0] == "autotune" and section in rows:
        rows[section].append((f[1], float(f[2]), None if f[3] == "-" else float(f[3])))
    if f and f[0] == "bucketed":
        bucketed[f[1]] = float(f[2])
    if f and f[0] == "specialised":
        spec[section.split("-")[0]].append((f[1], float(f[2]), float(f[3])))

def sizes(shape):
    return [int(x) for x in re.split("[x,]", shape)]

print(f"FMA peak {peak} GFLOP/s (1 thread)\n")
for kind in ("gemm", "conv"):
    if not rows[kind]:
        continue  # ONLY=conv
    names = sorted({p for (k, _), ps in peers.items() if k == kind for p in ps})
    extra = kind == "conv" and bucketed
    print(f"| {kind} | generic | naive | " + " | ".join(names) + " | generic / best peer |"
          + (" with the bucket | / best peer |" if extra else ""))
    print("|---" * (len(names) + 4 + 2 * bool(extra)) + "|")
    big, small, with_bucket = [], [], []
    for shape, g, n in rows[kind]:
        ps = peers.get((kind, shape), {})
        best = max(ps.values()) if ps else None
        r = g / best if best else None
        (big if min(sizes(shape)) >= 64 else small).append(r)
        cells = " | ".join(f"{ps.get(p, float('nan')):.1f}" for p in names)
        tail = ""
        if extra:
            b = bucketed[shape]
            with_bucket.append(b / best)
            tail = f" {b:.1f} | {b / best:.2f}× |"
        print(f"| {shape} | {g:.1f} | {'' if n is None else f'{n:.1f}'} | {cells} | {r:.2f}× |{tail}")
    if extra:
        print(f"\nevery shape: median {statistics.median(big + small):.2f}× the best peer, lowest {min(big + small):.2f}×;"
              f" with the bucket {statistics.median(with_bucket):.2f}×, lowest {min(with_bucket):.2f}×")
    if big:
        print(f"\nall sizes ≥ 64: median {statistics.median(big):.2f}× the best peer, lowest {min(big):.2f}× ({len(big)} shapes)")
    if small:
        print(f"a size below 64: median {statistics.median(small):.2f}×, lowest {min(small):.2f}× ({len(small)} shapes)")
    print(f"\n| {kind} at a specialised shape | generic | specialised | ratio |\n|---|---|---|---|")
    for shape, g, s in spec[kind]:
        print(f"| {shape} | {g:.1f} | {s:.1f} | {g / s:.2f}× |")
    print()
