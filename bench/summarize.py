#!/usr/bin/env python3
"""Turns a bench/headroom.sh log into the markdown tables of docs/performance.md.

Usage: python3 bench/summarize.py bench/results/headroom-<time>.log
"""
import re
import sys

text = open(sys.argv[1]).read()
sections = re.split(r"^## (\d) thread\(s\)$", text, flags=re.M)
GEMM = [("1024x1024x1024", 0), ("1000x1000x1000", 1), ("127x255x511", 2), ("1x4096x4096", 3), ("16x4096x4096", 4)]
CONV = [("C64 56² K64 3×3 s1 p1", "C=64 H=56", 0), ("C256 14² K256 3×3 s1 p1", "C=256 H=14", 1)]


def result(sec, pattern):
    m = re.search(pattern + r".*?gflops_med=([\d.]+)", sec)
    return float(m.group(1)) if m else None


def ours(sec, op, spec):
    m = re.search(r"autotune %s spec %d:\n([\d.]+) GFLOP/s" % (op, spec), sec)
    return float(m.group(1)) if m else None


single = {}
for i in range(1, len(sections), 2):
    nt, sec = int(sections[i]), sections[i + 1]
    peak = float(re.search(r"fma(?:512_zmm|256_ymm) GFLOP/s total .*?median=([\d.]+)", sec).group(1))
    triad = float(re.search(r"RESULT stream .*?triad_GBs_med=([\d.]+)", sec).group(1))
    print(f"\n### {nt} thread{'s' if nt > 1 else ''} (FMA peak {peak:.1f} GFLOP/s, triad {triad:.1f} GB/s)\n")
    print("| workload | autotune | % of peak | OpenBLAS | oneDNN | im2col+OpenBLAS | autotune vs best peer |" + (" vs 1 thread |" if nt > 1 else ""))
    print("|---|---|---|---|---|---|---|" + ("---|" if nt > 1 else ""))
    rows = []
    for shape, spec in GEMM:
        m, n, k = shape.split("x")
        a = ours(sec, "gemm", spec)
        blas = result(sec, rf"peer=openblas threads={nt} M={m} N={n} K={k} ")
        gemv = result(sec, rf"peer=openblas_gemv threads={nt} M={m} N={n} K={k} ") if m == "1" else None
        best = max(x for x in [blas, gemv] if x)
        peer = f"{blas:.1f}" + (f" (sgemv {gemv:.1f})" if gemv else "")
        rows.append((f"GEMM {shape}", a, peer, "—", "—", best, ("gemm", spec)))
    for name, key, spec in CONV:
        a = ours(sec, "conv3x3", spec)
        dnn = result(sec, rf"peer=onednn-direct threads={nt} {key} ")
        i2c = result(sec, rf"peer=im2col_openblas threads={nt} {key} ")
        rows.append((f"conv {name}", a, "—", f"{dnn:.1f}", f"{i2c:.1f}", max(dnn, i2c), ("conv3x3", spec)))
    for name, a, blas, dnn, i2c, best, key in rows:
        line = f"| {name} | **{a:.1f}** | {100 * a / peak:.0f}% | {blas} | {dnn} | {i2c} | {a / best:.2f}× |"
        if nt == 1:
            single[key] = a
        else:
            line += f" {a / single[key]:.2f}× |"
        print(line)
    print(f"\nGEMV roofline at the measured triad bandwidth: {0.5 * triad:.1f} GFLOP/s (0.5 FLOP per byte of B).")
