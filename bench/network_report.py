"""Tables of a bench/network.sh log: per thread count, each round's FMA peak, ResNet-18
end to end (the example against ONNX Runtime), the pass against the sum of its calls'
warm times, and per conv layer the example's GFLOP/s against oneDNN's and ONNX
Runtime's; medians over the rounds.

    python3 bench/network_report.py bench/results/network-<time>.log
"""

import re
import statistics
import sys

from resnet18_layers import LAYERS, figures, num

text = open(sys.argv[1]).read()
rounds = re.split(r"^## round (\d+), (\d) thread\(s\).*$", text, flags=re.M)
by_threads = {}  # threads -> list of per-round dicts
for i in range(1, len(rounds), 3):
    nt, sec = int(rounds[i + 1]), rounds[i + 2]

    fig = figures(sec, nt)
    r = {
        "peak": num(r"fma(?:512_zmm|256_ymm) GFLOP/s total min=[\d.]+ median=([\d.]+)", sec),
        "ours": fig["ours_ms"],
        "ort": fig["ort_ms"],
        "ratio_nodes": num(rf"nodes threads={nt}: the pass [\d.]+ ms is ([\d.]+)x", sec),
        # BEFORE's network, where the run had one
        "before": num(rf"before network: threads={nt}: +([\d.]+) ms", sec),
        # (the example's GFLOP/s, oneDNN's, ONNX Runtime's)
        "layers": {n: (f["ours"], f["onednn"], f["ort"]) for n, f in fig["layers"].items()},
    }
    by_threads.setdefault(nt, []).append(r)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


for nt, rs in sorted(by_threads.items()):
    print(f"\n#### {nt} thread(s), {len(rs)} rounds\n")
    print("| round | FMA peak | autotune ms | ONNX Runtime ms | speed vs ONNX Runtime | pass / sum of calls |")
    print("|---|---|---|---|---|---|")
    for i, r in enumerate(rs, 1):
        print(f"| {i} | {r['peak']} | {r['ours']:.2f} | {r['ort']:.2f} | {r['ort'] / r['ours']:.2f}× | {r['ratio_nodes']:.2f}× |")
    if any(r["before"] for r in rs):
        print("\nbefore (another build, same rounds): " + ", ".join(
            f"{r['before']:.2f} ms ({r['before'] / r['ours']:.2f}× this build's time)" for r in rs if r["before"]))
        print(f"median: {med(r['before'] for r in rs):.2f} ms; ONNX Runtime / before: "
              f"{med(r['ort'] / r['before'] for r in rs if r['before']):.2f}×\n")
    print(
        f"| median | {med(r['peak'] for r in rs):.1f} | {med(r['ours'] for r in rs):.2f} | "
        f"{med(r['ort'] for r in rs):.2f} | {med(r['ort'] / r['ours'] for r in rs):.2f}× | "
        f"{med(r['ratio_nodes'] for r in rs):.2f}× |"
    )
    print("\n| layer | autotune GFLOP/s | oneDNN | ONNX Runtime | vs oneDNN | vs ONNX Runtime |")
    print("|---|---|---|---|---|---|")
    for name, *_ in LAYERS:
        ours = med(r["layers"][name][0] for r in rs)
        dnnl = med(r["layers"][name][1] for r in rs)
        ort = med(r["layers"][name][2] for r in rs)
        # Ratios per round, then their median: each round's figures were taken together.
        vs_dnnl = med(o / d for o, d, _ in (r["layers"][name] for r in rs) if o and d)
        vs_ort = med(o / t for o, _, t in (r["layers"][name] for r in rs) if o and t)
        print(f"| {name} | {ours:.1f} | {dnnl:.1f} | {ort:.1f} | {vs_dnnl:.2f}× | {vs_ort:.2f}× |")
