"""Merged-axis starts for a search (generator 7): variants of a tuned config
whose reducing stage merges two spatial axes (`h*w`), for searches whose model
has not learned to propose them (bench/tune-orders.sh START=merge, and
bench/corpus.sh's second pass, so that the corpus holds them).

For each order of the space that merges two axes off the vector axis: the
config with that order, the first axis untiled and the second given a register
tile of pixels as long as the register file allows beside the config's vectors
(and one shorter), blocks of 1.

Also the prefetching starts (`ahead_starts`, bench/tune-orders.sh START=ahead
and bench/corpus.sh's third pass): a config with one operand under its
reduction read with `pack` 4 instead (copied whole, its next slice prefetched).

As a script: `python3 merge_starts.py "<cargo-autotune autotune>" FILE OP ISA [ahead]`
reads a `cargo autotune tune --json` summary on stdin and prints the starts of
its best config, one `knob=value ...` line each (what `tune --start` reads);
with `ahead`, the prefetching starts of the AHEAD_OF (default 3) best configs
of the summary's record log for its workload.
"""
import json
import os
import re
import subprocess
import sys


def space_knobs(at, src, op, workload):
    """Every knob of the workload's space and its choices, as the space offers them."""
    text = subprocess.run(at.split() + ["space", "--file", src, "--op", op, "--knobs"],
                          capture_output=True, text=True, check=True).stdout
    section = text.split(workload + ":", 1)[1]
    knobs = {}
    for line in section.splitlines()[1:]:
        if not line.startswith("  ") or "=" in line:
            break
        knob, *values = line.split()
        knobs[knob] = values
    return knobs


def reducing_stages(config):
    """The stages with a reduction: those whose knobs split an axis."""
    return sorted({k.split(".")[0] for k in config if ".split." in k})


def merge_starts(knobs, config, stage, isa):
    """The merged variants of `config`'s `stage` (dicts of knob to value)."""
    vector = str(config[f"{stage}.vector"])
    vaxis = re.match(r"[a-z_]+?(?=\d+$)", vector)
    vaxis = vaxis.group(0) if vaxis and vector != "none" else None
    # (Lanes along a reduction axis: no register tile of vectors.)
    vectors = int(config.get(f"{stage}.tile.{vaxis}", 1)) if vaxis else 1
    regs = 32 if isa == "avx512" else 16
    # Accumulators beside a register per vector of weights and a broadcast.
    longest = max(1, min(16, (regs - vectors - 1) // vectors))
    starts = []
    for order in (o for o in knobs.get(f"{stage}.order", []) if "*" in o):
        first, second = re.search(r"(\w+)\*(\w+)", order).groups()
        if vaxis in (first, second):
            continue
        offered = [t for t in knobs[f"{stage}.tile.{second}"] if int(t) <= longest]
        for t in offered[-2:]:
            c = dict(config)
            c[f"{stage}.order"] = order
            c[f"{stage}.tile.{first}"] = c[f"{stage}.block.{first}"] = 1
            c[f"{stage}.tile.{second}"] = t
            c[f"{stage}.block.{second}"] = 1
            starts.append(c)
    return starts


def ahead_starts(knobs, config, stage):
    """`config` with one of `stage`'s operands read with `pack` 4 instead, one
    variant per load site whose `pack` knob offers it."""
    return [dict(config, **{k: 4}) for k, values in knobs.items()
            if k.startswith(f"{stage}.pack.") and "4" in values and str(config.get(k)) != "4"]


def best_configs(log, workload, n):
    """The `n` fastest distinct configs of `workload` in a record log."""
    records = [json.loads(l) for l in open(log) if l.strip()]
    records = [r for r in records if r.get("workload") == workload and r.get("gflops")]
    records.sort(key=lambda r: -r["gflops"])
    out, seen = [], set()
    for r in records:
        key = line(r["config"])
        if key not in seen:
            seen.add(key)
            out.append(r["config"])
    return out[:n]


def line(config):
    """A config as `tune --start` reads it."""
    return " ".join(f"{k}={v}" for k, v in sorted(config.items()))


if __name__ == "__main__":
    at, src, op, isa = sys.argv[1:5]
    ahead = sys.argv[5:6] == ["ahead"]
    summary = json.load(sys.stdin)
    config = summary.get("best_config")
    if config:
        knobs = space_knobs(at, src, op, summary["workload"])
        configs = [config]
        if ahead:
            n = int(os.environ.get("AHEAD_OF", "3"))
            configs = best_configs(summary["log"], summary["workload"], n) or [config]
        printed = set()
        for c in configs:
            for stage in reducing_stages(c):
                starts = ahead_starts(knobs, c, stage) if ahead else merge_starts(knobs, c, stage, isa)
                for start in starts:
                    if line(start) not in printed:
                        printed.add(line(start))
                        print(line(start))
