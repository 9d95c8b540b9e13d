"""Starts for the search of a blocked variant (`blocked(...)`, an operator
`<op>__b16_...`): the plain operator's tuned config at the same shapes, carried
onto the split axes. The first axis `a` (the output's channels) becomes `a_o`
with the plain config's tile and block and `a_i` of one tile (its vector, a
whole block of 16); a reduction over blocked channels `c` becomes `c_o` (the
plain split in blocks) and `c_i` whole; the order is the plain one with `a_o`
for `a` and `a_i` innermost where the space offers it, else each rotation the
space offers (the tiles below with the first only); the weights are read as the plain config reads them and, where
the space offers it, copied with the next slice prefetched (pack 4); and each
of these with register tiles of one to four vectors of channels times pixels.

As a script: `python3 blocked_starts.py "<cargo-autotune autotune>" FILE VARIANT
WORKLOAD PLAIN_CONFIG_JSON` prints one `knob=value ...` line per start (what
`tune --start` reads).
"""
import json
import re
import sys

from merge_starts import line, space_knobs


def carry(knobs, plain, axis0, blocked_red):
    """The plain config's knobs renamed onto the variant's axes (dict)."""
    out = {}
    for k, v in plain.items():
        stage, kind, *rest = k.split(".")
        name = rest[0] if rest else None
        if axis0 is None:
            out[k] = v
            if kind == "split" and name in blocked_red:
                out.pop(k)
                out[f"{stage}.split.{name}_o"] = max(1, int(v) // 16)
                out[f"{stage}.split.{name}_i"] = 16
        elif kind in ("tile", "block") and name == axis0:
            out[f"{stage}.{kind}.{axis0}_o"] = v
            out[f"{stage}.{kind}.{axis0}_i"] = 1
        elif kind == "split" and name in blocked_red:
            out[f"{stage}.split.{name}_o"] = max(1, int(v) // 16)
            out[f"{stage}.split.{name}_i"] = 16
        elif kind == "vector":
            out[k] = f"{axis0}_i16"
        elif kind == "order":
            out[k] = re.sub(rf"\b{axis0}\b", f"{axis0}_o", v) + f"-{axis0}_i"
        else:
            out[k] = v
    return out


def nearest(knobs, config):
    """Every knob at an offered value: the nearest number, else the first offered."""
    out = {}
    for k, values in knobs.items():
        v = str(config.get(k, values[0]))
        if v not in values:
            nums = [x for x in values if x.lstrip("-").isdigit()]
            if v.lstrip("-").isdigit() and nums:
                v = min(nums, key=lambda x: abs(int(x) - int(v)))
            else:
                v = values[0]
        out[k] = v
    return out


def tiles(knobs, config, axis0):
    """The config with register tiles of a vector of 16 channels times pixels
    (the last spatial axis, or two rows of it) and a few vectors of channels: the
    shapes of oneDNN's direct kernels, within 28 accumulators."""
    out = []
    stages = sorted({k.split(".")[0] for k in knobs if k.endswith(f".tile.{axis0}_o")})
    for stage in stages:
        spatial = [k.split(".")[2] for k in knobs
                   if k.startswith(f"{stage}.tile.") and not k.endswith(("_o", "_i"))]
        if not spatial:
            continue
        last = spatial[-1]
        rows = spatial[-2] if len(spatial) > 1 else None
        for vectors, pixels, two_rows in [(1, 14, False), (1, 7, True), (2, 7, False),
                                          (2, 6, False), (4, 6, False), (4, 3, False)]:
            c = dict(config)
            for a in spatial:
                c[f"{stage}.tile.{a}"] = 1
            c[f"{stage}.tile.{axis0}_o"] = vectors
            c[f"{stage}.tile.{axis0}_i"] = 1
            c[f"{stage}.tile.{last}"] = pixels
            if two_rows and rows:
                c[f"{stage}.tile.{rows}"] = 2
            out.append(c)
    return out


def starts(knobs, plain):
    # The output's split axis, where the output is blocked.
    axis0 = next((k.split(".")[2][:-2] for k in knobs if re.search(r"\.tile\.\w+_o$", k)), None)
    blocked_red = {k.split(".")[2][:-2] for k in knobs if re.search(r"\.split\.\w+_o$", k)}
    base = carry(knobs, plain, axis0, blocked_red)
    out = []
    for stage in sorted({k.split(".")[0] for k in knobs if k.endswith(".order")}):
        orders = knobs[f"{stage}.order"]
        wanted = base.get(f"{stage}.order")
        rotations = [o for o in orders if "/" not in o and "*" not in o]
        for i, order in enumerate([wanted] if wanted in orders else rotations):
            c = dict(base, **{f"{stage}.order": order})
            packs = [k for k in knobs if k.startswith(f"{stage}.pack.") and "4" in knobs[k]]
            for t in [c] + (tiles(knobs, c, axis0) if i == 0 and axis0 else []):
                out.append(nearest(knobs, t))
                if packs:
                    out.append(nearest(knobs, dict(t, **{p: 4 for p in packs})))
    seen, unique = set(), []
    for c in out:
        key = line(c)
        if key not in seen:
            seen.add(key)
            unique.append(key)
    return unique


if __name__ == "__main__":
    at, src, variant, workload, plain = sys.argv[1:6]
    knobs = space_knobs(at, src, variant, workload)
    print("\n".join(starts(knobs, json.loads(plain))))
