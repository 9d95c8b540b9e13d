#!/usr/bin/env python3
"""Report of a bench/transfer.sh run: curves.csv, one SVG per target and
summary.md. The measure (AutoTVM's): trials each run needs to reach 95% of the
final best of the run without transfer (same seed)."""

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from experiments import load_runs, median_curve, reach, svg, unpack  # noqa: E402


def main(d):
    unpack(d)
    runs = load_runs(d)
    md = [f"# Transfer learning: {os.path.basename(d.rstrip('/'))}", "",
          "Trials to reach 95% of the no-transfer run's final best (same seed; "
          "`>N`: not within N trials), and final bests.", "",
          "| target | seed | target GFLOP/s | plain: trials | transfer: trials | "
          "plain final | transfer final | transfer tuner s |",
          "|---|---|---|---|---|---|---|---|"]
    summary = []
    with open(os.path.join(d, "curves.csv"), "w") as csv:
        csv.write("target,mode,seed,trial,best_gflops\n")
        for name in ["c7", "c8", "c9", "gemm1024"]:
            modes = runs.get(name, {})
            plain, tr = modes.get("plain", {}), modes.get("transfer", {})
            for mode, seeds in modes.items():
                for seed, r in sorted(seeds.items()):
                    for i, g in enumerate(r["best"]):
                        csv.write(f"{name},{mode},{seed},{i+1},{g:.3f}\n")
            ratios = []
            for seed in sorted(set(plain) & set(tr)):
                p, t = plain[seed]["best"], tr[seed]["best"]
                target = 0.95 * p[-1]
                a, b = reach(p, target), reach(t, target)
                ratios.append(a / b if b else a / (len(t) + 1))
                md.append(f"| {name} | {seed} | {target:.1f} | {a} | "
                          f"{b if b else '>' + str(len(t))} | {p[-1]:.1f} | {t[-1]:.1f} | "
                          f"{tr[seed]['summary'].get('tuner_seconds', float('nan')):.1f} |")
            if ratios:
                summary.append(f"- {name}: median speed-up in trials {statistics.median(ratios):.2f}× "
                               f"(per seed: {', '.join(f'{x:.2f}' for x in ratios)})")
                series = [("no transfer", "#1f77b4", median_curve([r["best"] for r in plain.values()]), False),
                          ("transfer (history C1–C6)", "#d62728",
                           median_curve([r["best"] for r in tr.values()]), False)]
                svg(f"{name}: best GFLOP/s against trials, 1 thread", series,
                    os.path.join(d, f"{name}.svg"))
    md += [""] + summary + [""]
    with open(os.path.join(d, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main(sys.argv[1])
