#!/usr/bin/env python3
"""Report of a bench/experiments.sh run: curves.csv, one SVG per workload and
summary.md (the figures docs/experiments.md quotes).

    python3 bench/experiments.py bench/results/experiments-<stamp>

Reads <workload>.<tuner>.<seed>.jsonl (autotune record logs), their .json run
summaries, and tvm-<wl>/database_tuning_record.json + tvm-<wl>.log when present. A
packed run's raw.tar.xz (bench/results/README.md) is unpacked beside them first.
"""

import glob
import json
import os
import re
import statistics
import sys
import tarfile

TVM_NAMES = {"gemm512": "matmul512", "gemm1024": "matmul1024", "conv-c2": "conv64",
             "conv-c6": "conv128", "conv-c9": "conv256"}
FLOPS = {"gemm512": 2 * 512**3, "gemm1024": 2 * 1024**3, "conv-c2": 2 * 64 * 64 * 9 * 56 * 56,
         "conv-c6": 2 * 128 * 128 * 9 * 28 * 28, "conv-c9": 2 * 256 * 256 * 9 * 14 * 14}
ORDER = ["xgb-rank", "xgb-reg", "xgb-rank-nodiv", "genetic", "random", "tvm"]
COLORS = {"xgb-rank": "#d62728", "xgb-reg": "#ff7f0e", "xgb-rank-nodiv": "#9467bd",
          "genetic": "#2ca02c", "random": "#1f77b4", "tvm": "#7f7f7f"}


def unpack(d):
    """A packed run (bench/results/README.md): its raw.tar.xz unpacked into d, keeping
    the files already there, so that the report reads what the run wrote."""
    path = os.path.join(d, "raw.tar.xz")
    if not os.path.exists(path):
        return
    with tarfile.open(path) as tar:
        todo = [m for m in tar.getmembers() if not os.path.lexists(os.path.join(d, m.name))]
        if hasattr(tarfile, "data_filter"):
            tar.extractall(d, members=todo, filter="data")
        else:
            tar.extractall(d, members=todo)


def random_samples(d, name):
    """Every throughput random search measured on `name` (all seeds, failures as
    0), leaving out each run's first trial (the default config)."""
    out = []
    for path in sorted(glob.glob(os.path.join(d, f"{name}.random.*.jsonl"))):
        with open(path) as f:
            out += [json.loads(line).get("gflops") or 0.0 for line in f][1:]
    return out


def load_runs(d, skip_first=False):
    """{workload: {tuner: {seed: {"best": [...], "elapsed": [...], "summary": {...}}}}}

    skip_first: leave out each run's first trial (the space's default config,
    which every tuner measures first), to compare the searches alone."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
        name, tuner, seed = os.path.basename(path)[: -len(".jsonl")].rsplit(".", 2)
        best, elapsed, b, t0 = [], [], 0.0, None
        with open(path) as f:
            for k, line in enumerate(f):
                r = json.loads(line)
                t0 = r["time"] if t0 is None else t0
                if skip_first and k == 0:
                    continue
                b = max(b, r.get("gflops") or 0.0)
                best.append(b)
                elapsed.append(r["time"] - t0)
        summary = {}
        sp = path[: -len(".jsonl")] + ".json"
        if os.path.exists(sp) and os.path.getsize(sp) > 0:
            with open(sp) as f:
                summary = json.load(f)
        runs.setdefault(name, {}).setdefault(tuner, {})[int(seed)] = {
            "best": best, "elapsed": elapsed, "summary": summary}
    return runs


def load_tvm(d, name):
    """TVM's curve from its tuning database (records in commit order) and RESULT line."""
    wl = TVM_NAMES.get(name)
    db = os.path.join(d, f"tvm-{wl}", "database_tuning_record.json")
    if wl is None or not os.path.exists(db):
        return None
    best, b = [], 0.0
    with open(db) as f:
        for line in f:
            rec = json.loads(line)
            secs = rec[1][1] if isinstance(rec[1], list) and len(rec[1]) > 1 else None
            if secs:
                s = sum(float(x) for x in secs) / len(secs)
                if 0 < s < 1e9:
                    b = max(b, FLOPS[name] / s / 1e9)
            best.append(b)
    result = {}
    log = os.path.join(d, f"tvm-{wl}.log")
    if os.path.exists(log):
        for line in open(log):
            if line.startswith("RESULT"):
                result = dict(kv.split("=", 1) for kv in line.split()[1:])
    return {"best": best, "result": result}


def reach(curve, target):
    """1-based trial count at which the curve first reaches target, else None."""
    for i, g in enumerate(curve):
        if g >= target:
            return i + 1
    return None


def median_curve(curves):
    n = min(len(c) for c in curves)
    return [statistics.median(c[i] for c in curves) for i in range(n)]


def svg(title, series, path):
    """series: [(label, color, curve, dashed)]"""
    W, H, L, B = 760, 440, 64, 44
    max_n = max(len(c) for _, _, c, _ in series)
    max_g = max(max(c) for _, _, c, _ in series) * 1.05
    x = lambda i: L + (W - L - 24) * i / max_n
    y = lambda g: (H - B) - (H - B - 34) * g / max_g
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
         'font-family="sans-serif" font-size="12">',
         '<rect width="100%" height="100%" fill="white"/>',
         f'<text x="{L}" y="20" font-size="14">{title}</text>',
         f'<line x1="{L}" y1="{H-B}" x2="{W-24}" y2="{H-B}" stroke="black"/>',
         f'<line x1="{L}" y1="34" x2="{L}" y2="{H-B}" stroke="black"/>']
    for k in range(5):
        g, n = max_g * k / 4, max_n * k / 4
        s.append(f'<text x="{L-6}" y="{y(g)+4:.1f}" text-anchor="end">{g:.0f}</text>')
        s.append(f'<text x="{x(n):.1f}" y="{H-B+16}" text-anchor="middle">{n:.0f}</text>')
    s.append(f'<text x="{(L+W)/2}" y="{H-8}" text-anchor="middle">trials</text>')
    s.append(f'<text x="16" y="{H/2}" transform="rotate(-90 16 {H/2})" '
             'text-anchor="middle">best GFLOP/s (median over seeds)</text>')
    for i, (label, color, c, dashed) in enumerate(series):
        pts = " ".join(f"{x(k+1):.1f},{y(g):.1f}" for k, g in enumerate(c))
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        s.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{pts}"/>')
        ly = H - B - 14 - 16 * (len(series) - 1 - i)
        s.append(f'<rect x="{W-300}" y="{ly-5}" width="14" height="3" fill="{color}"/>'
                 f'<text x="{W-280}" y="{ly}">{label}: {c[-1]:.1f}</text>')
    s.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(s) + "\n")


def goal_lines(tuners, label, samples=None):
    """The goal: trials xgb-rank needs to reach 95% of its final best, against the
    trials random search needs to reach that same GFLOP/s (per seed)."""
    xr, rnd = tuners.get("xgb-rank", {}), tuners.get("random", {})
    rows = []
    for seed in sorted(set(xr) & set(rnd)):
        target = 0.95 * xr[seed]["best"][-1]
        rows.append((seed, target, reach(xr[seed]["best"], target), reach(rnd[seed]["best"], target)))
    if not rows:
        return []
    md = [f"Goal, {label} (per seed): trials for xgb-rank to reach 95% of its final best, "
          "and for random search to reach the same GFLOP/s (`>N`: not within its N trials):", ""]
    ratios = []
    for seed, target, a, b in rows:
        n = len(rnd[seed]["best"])
        ratios.append(a / b if b else a / (n + 1))
        md.append(f"- seed {seed}: target {target:.1f} GFLOP/s; xgb-rank {a}, random "
                  f"{b if b else '>' + str(n)}")
    bound = " (an upper bound: random missed the target)" if any(r[3] is None for r in rows) else ""
    md += [f"- median ratio xgb-rank/random: {statistics.median(ratios):.3f}{bound}"]
    if samples:
        # Random search hits a target with probability p per trial, so it needs
        # 1/p trials on average: estimated from every random config measured.
        exp = []
        for seed, target, a, b in rows:
            hits = sum(1 for g in samples if g >= target)
            e = len(samples) / hits if hits else None
            exp.append((a, e, hits))
            md.append(f"- seed {seed}: {hits} of {len(samples)} random configs reach "
                      f"{target:.1f}, so random search needs "
                      f"{f'{e:.0f}' if e else f'>{len(samples)}'} trials on average; "
                      f"xgb-rank/random = {a / e if e else a / len(samples):.3f}"
                      f"{'' if e else ' (upper bound)'}")
        md.append("- median of those ratios: "
                  f"{statistics.median([a / e if e else a / len(samples) for a, e, _ in exp]):.3f}")
    md.append("")
    return md


def main(d):
    unpack(d)
    runs = load_runs(d)
    search_only = load_runs(d, skip_first=True)
    md = [f"# Tuner experiments: {os.path.basename(d.rstrip('/'))}", ""]
    with open(os.path.join(d, "curves.csv"), "w") as csv:
        csv.write("workload,tuner,seed,trial,best_gflops,elapsed_s\n")
        for name, tuners in sorted(runs.items()):
            for tuner, seeds in sorted(tuners.items()):
                for seed, r in sorted(seeds.items()):
                    for i, (g, e) in enumerate(zip(r["best"], r["elapsed"])):
                        csv.write(f"{name},{tuner},{seed},{i+1},{g:.3f},{e}\n")
            tvm = load_tvm(d, name)
            if tvm:
                for i, g in enumerate(tvm["best"]):
                    csv.write(f"{name},tvm,0,{i+1},{g:.3f},\n")
    for name in sorted(runs, key=lambda n: list(TVM_NAMES).index(n) if n in TVM_NAMES else 99):
        tuners = runs[name]
        tvm = load_tvm(d, name)
        md += [f"## {name}", "",
               "| tuner | seeds | trials | final best GFLOP/s (median; min–max) | "
               "trials to 95% of own final (median) | wall s (median) | tuner s (median) |",
               "|---|---|---|---|---|---|---|"]
        series = []
        for tuner in ORDER:
            seeds = tuners.get(tuner)
            if not seeds:
                continue
            finals = [r["best"][-1] for r in seeds.values()]
            to95 = [reach(r["best"], 0.95 * r["best"][-1]) for r in seeds.values()]
            walls = [r["summary"].get("seconds", float("nan")) for r in seeds.values()]
            tsecs = [r["summary"].get("tuner_seconds", float("nan")) for r in seeds.values()]
            n = min(len(r["best"]) for r in seeds.values())
            md.append(f"| {tuner} | {len(seeds)} | {n} | {statistics.median(finals):.1f} "
                      f"({min(finals):.1f}–{max(finals):.1f}) | {statistics.median(to95):.0f} | "
                      f"{statistics.median(walls):.0f} | {statistics.median(tsecs):.1f} |")
            series.append((tuner, COLORS.get(tuner, "black"),
                           median_curve([r["best"] for r in seeds.values()]), False))
        if tvm and tvm["best"]:
            res = tvm["result"]
            md.append(f"| tvm (MetaSchedule) | 1 | {len(tvm['best'])} | "
                      f"{max(tvm['best']):.1f} in tuning, {res.get('gflops_med', '?')} re-timed | "
                      f"{reach(tvm['best'], 0.95 * max(tvm['best']))} | "
                      f"{res.get('tune_wall_s', '?')} | |")
            series.append(("tvm MetaSchedule", COLORS["tvm"], tvm["best"], True))
        md.append("")
        md += goal_lines(tuners, "all trials")
        md += goal_lines(search_only[name], "without the default config (the search alone)",
                         random_samples(d, name))
        xr = tuners.get("xgb-rank", {})
        if tvm and tvm["best"] and xr:
            # TVM's figure: its best kernel re-timed after tuning.
            tvm_best = float(tvm["result"].get("gflops_med", max(tvm["best"])))
            hits = []
            for seed, r in sorted(xr.items()):
                n = reach(r["best"], tvm_best)
                hits.append(f"seed {seed}: {n} trials, {r['elapsed'][n - 1]} s" if n
                            else f"seed {seed}: not in {len(r['best'])} trials "
                                 f"(best {r['best'][-1]:.1f})")
            md.append(f"Against TVM ({tvm_best:.1f} GFLOP/s after {len(tvm['best'])} trials, "
                      f"{tvm['result'].get('tune_wall_s', '?')} s): xgb-rank reaches it — "
                      + "; ".join(hits) + ".")
            md.append("")
        svg(f"{name}: best GFLOP/s against trials, 1 thread", series,
            os.path.join(d, f"{name}.svg"))
    with open(os.path.join(d, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main(sys.argv[1])
