#!/usr/bin/env python3
"""Turns a bench/peers.sh run into the markdown tables of docs/performance.md.

Usage: python3 bench/peers_report.py bench/results/peers-<time>   (reads run.log)
All figures are GFLOP/s medians unless marked ms (a GEMM figure of a run with ROUNDS > 1:
the median of the rounds' medians); "vs best" is autotune's speed over the fastest peer of
the row (above 1.00× autotune is faster).
"""
import re
import statistics
import sys
from resnet18_layers import LAYERS, figures, num

text = open(f"{sys.argv[1]}/run.log").read()
sections = re.split(r"^## (\d) thread\(s\)$", text, flags=re.M)
SHAPES = ["256x256x256", "512x512x512", "1024x1024x1024", "127x255x511", "1x4096x4096", "16x4096x4096"]


def med(pattern, text):
    """The median over every match of `pattern`'s first group in `text`, or None."""
    xs = [float(x) for x in re.findall(pattern, text)]
    return statistics.median(xs) if xs else None


def fmt(x):
    return "—" if x is None else f"{x:.1f}"


def ratio(a, peers):
    peers = [p for p in peers if p]
    return f"{a / max(peers):.2f}×" if a and peers else "—"


for i in range(1, len(sections), 2):
    nt, sec = int(sections[i]), sections[i + 1]
    plural = "s" if nt > 1 else ""
    peak = num(r"fma(?:512_zmm|256_ymm) GFLOP/s total .*?median=([\d.]+)", sec)
    print(f"\n### GEMM, {nt} thread{plural} (FMA peak {fmt(peak)} GFLOP/s)\n")
    print("| M×N×K | autotune | OpenBLAS | `gemm` 0.19 | `matrixmultiply` 0.3 | autotune vs best peer |")
    print("|---|---|---|---|---|---|")
    for shape in SHAPES:
        m, n, k = shape.split("x")
        key = rf"threads={nt} M={m} N={n} K={k} gflops_med=([\d.]+)"
        a = med(rf"autotune gemm {shape}:\n([\d.]+) GFLOP/s", sec)
        blas = med(r"peer=openblas " + key, sec)
        gemv = med(r"peer=openblas_gemv " + key, sec) if m == "1" else None
        gemm = med(r"peer=gemm-[^ ]* " + key, sec)
        mm = med(r"peer=matrixmultiply-[^ ]* " + key, sec)
        blas_s = fmt(blas) + (f" (sgemv {gemv:.1f})" if gemv else "")
        print(f"| {shape} | **{fmt(a)}** | {blas_s} | {fmt(gemm)} | {fmt(mm)} | {ratio(a, [blas, gemv, gemm, mm])} |")

    rounds = len(re.findall(r"^# GEMM", sec, flags=re.M))
    if rounds > 1:
        print(f"\n(medians of {rounds} alternating rounds)")
    if "# ResNet-18" not in sec:
        continue
    print(f"\n### ResNet-18 conv layers, {nt} thread{plural} (GFLOP/s over padded taps; autotune ms)\n")
    print("| layer | C→K, H, R/stride | autotune | ms | im2col+OpenBLAS | oneDNN | ONNX Runtime | autotune vs best peer |")
    print("|---|---|---|---|---|---|---|---|")
    fig = figures(sec, nt)
    for name, c, h, k, r, st, pad, _ in LAYERS:
        f = fig["layers"][name]
        ms, a, i2c, dnn, ort = f["ms"], f["ours"], f["im2col"], f["onednn"], f["ort"]
        print(f"| {name} | {c}→{k}, {h}², {r}×{r}/{st} | **{fmt(a)}** | {ms:.3f} | {fmt(i2c)} | {fmt(dnn)} | {fmt(ort)} | {ratio(a, [i2c, dnn, ort])} |")

    ours, ort = fig["ours_ms"], fig["ort_ms"]
    print(f"\n**ResNet-18 end to end, {nt} thread{plural}:** autotune **{ours:.2f} ms**, "
          f"ONNX Runtime {ort:.2f} ms: autotune {ort / ours:.2f}× ONNX Runtime's speed.")

check = re.search(r"RESULT ort check (.*)", text)
if check:
    print(f"\nSame network: ONNX Runtime on the exported weights vs the example's logits: {check.group(1)}.")
