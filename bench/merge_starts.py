"""Merged-axis starts for a search (generator 7): variants of a tuned config
whose reducing stage merges two spatial axes (`h*w`), for searches whose model
has not learned to propose them (bench/tune-orders.sh START=merge, and
bench/corpus.sh's second pass, so that the corpus holds them).

For each order of the space that merges two axes off the vector axis: the
config with that order, the first axis untiled and the second given a register
tile of pixels as long as the register file allows beside the config's vectors
(and one shorter), blocks of 1.

As a script: `python3 merge_starts.py "<cargo-autotune autotune>" FILE OP ISA`
reads a `cargo autotune tune --json` summary on stdin and prints the starts of
its best config, one `knob=value ...` line each (what `tune --start` reads).
"""
import json
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
    vectors = int(config[f"{stage}.tile.{vaxis}"]) if vaxis else 1
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


def line(config):
    """A config as `tune --start` reads it."""
    return " ".join(f"{k}={v}" for k, v in sorted(config.items()))


if __name__ == "__main__":
    at, src, op, isa = sys.argv[1:5]
    summary = json.load(sys.stdin)
    config = summary.get("best_config")
    if config:
        knobs = space_knobs(at, src, op, summary["workload"])
        for stage in reducing_stages(config):
            for c in merge_starts(knobs, config, stage, isa):
                print(line(c))
