#!/usr/bin/env python3
"""Report of a bench/fewshot.sh run: summary.md with, per held-out case, the
reference best, each tuner's trials and seconds to reach 95% of it (median over
seeds), the zero-shot pick (the model's first pick, the run's second trial
after the default config), the best at budgets 8 to 64 (median over seeds), and
the held-out model's ranking quality beside the shipped model's.

    python3 bench/fewshot.py bench/results/fewshot-<stamp>

The reference best is the best any run measured on the case (the REF_TRIALS
xgb-rank run included), so a tuner's 95% mark is against all that was found.

A directory holding runs in subdirectories instead (e.g. before/ and after/ of a
change, each a fewshot.sh OUT sharing one reference run) is reported as one
comparison: each subdirectory's tuners labelled with its name, against the best
any of them measured.
"""

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from experiments import load_runs, reach, unpack  # noqa: E402

BUDGETS = [8, 16, 32, 48, 64]
ORDER = ["few-shot", "few-shot-refit", "xgb-rank", "genetic", "random"]


def at(curve, n):
    """Best after n trials (a run that stopped earlier keeps its best)."""
    return curve[min(n, len(curve)) - 1] if curve else 0.0


def first_pick(d, name, tuner, seed):
    """Throughput of a run's second trial (the model's top pick; the first is
    the default config), or None."""
    sub, _, tuner = tuner.rpartition("/")
    with open(os.path.join(d, sub, f"{name}.{tuner}.{seed}.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    return rows[1].get("gflops") or 0.0 if len(rows) > 1 else None


def median_or_none(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec="{:.0f}"):
    return "—" if x is None else spec.format(x)


def runs_of(d):
    """The runs of d, or of its subdirectories (tuners named `sub/tuner`, the
    reference run once), and the directories holding them."""
    unpack(d)
    runs = load_runs(d)
    if runs:
        return runs, [""]
    subs = sorted(e for e in os.listdir(d) if os.path.isdir(os.path.join(d, e)) and e != "models")
    for sub in subs:
        unpack(os.path.join(d, sub))
        for name, tuners in load_runs(os.path.join(d, sub)).items():
            for tuner, seeds in tuners.items():
                key = tuner if tuner == "reference" else f"{sub}/{tuner}"
                runs.setdefault(name, {}).setdefault(key, seeds)
    return runs, subs


def main(d):
    runs, subs = runs_of(d)
    order = [f"{sub}/{t}" if sub else t for t in ORDER for sub in subs]
    out = ["# Few-shot tuning on held-out workloads", ""]
    for sub in subs:
        log = os.path.join(d, sub, "run.log")
        if os.path.exists(log):
            # The run's header lines, once each (a continued run appends its own).
            heads = [line.strip() for line in open(log) if line.startswith(("# fewshot", "# corpus"))]
            if sub:
                out.append(f"{sub}:")
            out += list(dict.fromkeys(heads)) + [""]
    for name in sorted(runs):
        tuners = runs[name]
        best = max(max(r["best"] or [0.0]) for t in tuners.values() for r in t.values())
        out += [f"## {name}", "", f"Reference best: {best:.1f} GFLOP/s "
                f"(the reference run alone: {max(tuners['reference'][0]['best']):.1f})", ""]
        out += ["| tuner | seeds | trials to 95% | s to 95% | reached | trials run | zero-shot | "
                + " | ".join(f"@{b}" for b in BUDGETS) + " |",
                "|---|---|---|---|---|---|---|" + "---|" * len(BUDGETS)]
        for tuner in order:
            if tuner not in tuners:
                continue
            seeds = tuners[tuner]
            reached = [reach(r["best"], 0.95 * best) for r in seeds.values()]
            secs = [r["elapsed"][n - 1] if n else None for r, n in zip(seeds.values(), reached)]
            few = tuner.rpartition("/")[2].startswith("few-shot")
            zero = [first_pick(d, name, tuner, s) for s in seeds] if few else []
            zero = [z / best if z is not None else None for z in zero]
            row = [tuner, str(len(seeds)), fmt(median_or_none(reached)), fmt(median_or_none(secs)),
                   f"{sum(n is not None for n in reached)}/{len(seeds)}",
                   fmt(median_or_none([len(r["best"]) for r in seeds.values()])),
                   fmt(median_or_none(zero), "{:.2f}") if few else ""]
            row += [fmt(statistics.median(at(r["best"], b) for r in seeds.values()) / best, "{:.2f}")
                    for b in BUDGETS]
            out.append("| " + " | ".join(row) + " |")
        out.append("")
        for kind, what in [("heldout", "trained without the family (rank:pairwise, as shipped)"),
                           ("heldout-reg", "trained without the family by regression"),
                           ("seen", "that saw it (the shipped one)")]:
            for sub in subs:
                path = os.path.join(d, sub, f"{name}.rank-{kind}.txt")
                if os.path.exists(path):
                    by = f" ({sub})" if sub else ""
                    out += [f"Ranking of the family's corpus records by the model {what}{by}:",
                            "", "```"] + [line.rstrip() for line in open(path)] + ["```", ""]
    with open(os.path.join(d, "summary.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
