"""Search this CPU's cache entries of some operators again, keeping a new config only
where an alternating A/B against the entry confirms it (issue 19: entries tuned with
few trials under an older generator).

  python3 bench/retune_ab.py LOG OP...          # the ResNet-18 example's operators

For each entry of this CPU (vendor-family-model) at its best ISA level: TRIALS (48)
trials of xgb-rank with transfer started from the entry (`--start`, saved where the
tuner's re-timing beats it), then, where the config changed, ROUNDS (3) alternating
rounds of `cargo autotune bench --config` of the entry's config and the new one, and as
many again where the rounds disagree; the entry is put back unless the new config won
most rounds and its median is at least 2% faster (on a noisy host three rounds of 0.1 ms
calls on two threads put a config 1.127x ahead that then lost three of four rounds).
Everything goes to LOG, with the FMA peak (`bench/peak.c`) before and after.
CARGO_AUTOTUNE names the CLI; FILE and CACHE the operators and their cache; THREADS
("1 2") the entries' thread counts; SPECS (every one) the specialisations' indexes;
STARTS a directory whose `OP-SPEC.txt` (as `sweep --configs` reads it) adds configs the
search measures first beside the entry's (swept candidates the model does not rank high).
SPLIT16=1 adds, for a conv's entry (a `y.split.c` knob), the entry with its reduction split
by 16 channels, under its own blocks and under blocks of 32 rows × 16 pixels: on
GenuineIntel-6-167 that kept one tile's weights in L1 and ran C9 1.015-1.12x and C4 1.037x
(docs/performance.md, "A budget that dropped an entry"), where 48-trial searches from the
entries had not found it.
"""
import os
import re
import statistics
import subprocess
import sys

AT = os.environ.get("CARGO_AUTOTUNE", os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release/cargo-autotune"))
FILE = os.environ.get("FILE", "examples/resnet18/src/ops.rs")
CACHE = os.environ.get("CACHE", "tuning-cache")
TRIALS = os.environ.get("TRIALS", "48")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
THREADS = os.environ.get("THREADS", "1 2").split()
SPECS = os.environ.get("SPECS")
STARTS = os.environ.get("STARTS")
SPLIT16 = os.environ.get("SPLIT16") == "1"
GAIN = 1.02


def cpu():
    info = open("/proc/cpuinfo").read()
    field = lambda k: re.search(rf"^{k}\s*: (.*)$", info, re.M).group(1)
    isa = "avx512" if " avx512f" in field("flags") else "avx2"
    return f'{field("vendor_id")}-{field("cpu family")}-{field("model")}', isa


def entries(text):  # the header and the `[[entry]]` blocks of a cache file
    head, *blocks = text.split("[[entry]]")
    return head, blocks


def key(block):  # an older entry may lack a field (its CPU id)
    field = lambda k: (re.search(rf"^{k} = (.*)$", block, re.M) or [None, ""])[1]
    return tuple(field(k) for k in ("workload_id", "target", "cpu_id", "threads"))


def config(block):
    pairs = re.findall(r'^"([^"]+)" = (.*)$', block[block.index("[entry.config]"):], re.M)
    return " ".join(k + "=" + v.strip('"') for k, v in pairs)


def split16(config):  # SPLIT16's variants of a conv's config (none for other operators)
    split = re.search(r"y\.split\.c=(\d+)", config)
    if not SPLIT16 or not split or int(split.group(1)) < 32:  # (a split by 16 is a choice from 32 channels on)
        return []
    split = re.sub(r"y\.split\.c=\d+", "y.split.c=16", config)
    whole = re.sub(r"y\.block\.v=\d+", "y.block.v=16", re.sub(r"y\.block\.h=\d+", "y.block.h=32", split))
    return [c for c in dict.fromkeys([split, whole]) if c != config]


def peak(say):
    probe = "/tmp/retune-ab-peak"
    subprocess.run(["gcc", "-O2", "-pthread", os.path.join(os.path.dirname(__file__), "peak.c"), "-o", probe], check=True)
    for t in THREADS:
        out = subprocess.run([probe, t], capture_output=True, text=True).stdout
        say("  " + next(line for line in out.splitlines() if "fma" in line))


def main():
    log = open(sys.argv[1], "a")
    say = lambda line: print(line, file=log, flush=True)
    cpu_id, isa = cpu()
    say("# FMA peak before:")
    peak(say)
    src = open(FILE).read()
    for op in sys.argv[2:]:
        path = f"{CACHE}/{op}.toml"
        attr = src[: src.index(f"pub fn {op}(")].rsplit("#[tensor_op(", 1)[1]
        # Each specialisation's exact sizes by name (buckets are skipped below).
        specs = [dict(re.findall(r"(\w+) *= *(\d+)\s*(?:,|$)", s)) for s in re.findall(r"specialize\(([^)]*)\)", attr)]
        for entry in entries(open(path).read())[1]:
            wid, target, cpu_of, threads = key(entry)
            # This CPU's exact specialisations at its best level (a bucket is tuned
            # over its range: `cargo autotune tune` on it, not an A/B at one shape).
            if cpu_id not in cpu_of or not target.endswith(f'/{isa}"') or wid.count(":") > 2 or threads not in THREADS:
                continue
            # The entry's readable name spells its sizes: `gemm[M127 K511 N255]`.
            name = re.search(r'^workload = "[^[]*\[(.*)\]"', entry, re.M).group(1)
            shape = dict(re.findall(r"([A-Za-z_]\w*?)(\d+)(?: |$)", name))
            found = [i for i, s in enumerate(specs) if s == shape]
            if len(found) != 1:
                say(f"== {op} {name}: no specialisation has these sizes; skipped")
                continue
            spec = found[0]
            if SPECS and str(spec) not in SPECS.split():
                continue
            old = config(entry)
            start = "/tmp/retune-ab-start.txt"
            extra = STARTS and os.path.join(STARTS, f"{op}-{spec}.txt")
            open(start, "w").write(old + "\n" + (open(extra).read() if extra and os.path.exists(extra) else "")
                                   + "".join(c + "\n" for c in split16(old)))
            say(f"== {op} spec {spec} [{name}] {threads} thread(s)")
            out = subprocess.run([AT, "autotune", "tune", "--file", FILE, "--cache", CACHE, "--op", op, "--spec", str(spec),
                                  "--threads", threads, "--tuner", "xgb-rank", "--trials", TRIALS, "--start", start,
                                  "--log", f"/tmp/retune-ab-{op}-{spec}-{threads}.jsonl", "--dir", "/tmp/retune-ab", "--save"],
                                 capture_output=True, text=True)
            for line in (out.stdout + out.stderr).splitlines():
                if line.startswith(("best", "confirmed", op, "Error", "error")):
                    say("  " + line)
            head, blocks = entries(open(path).read())
            i = next(i for i, b in enumerate(blocks) if key(b) == key(entry))
            new = config(blocks[i])
            put_back = new == old
            if new != old:
                res = {"old": [], "new": []}

                def rounds(n):
                    for _ in range(n):
                        for v, c in (("old", old), ("new", new)):
                            pin = ["taskset", "-c", "1"] if threads == "1" else []
                            o = subprocess.run(pin + [AT, "autotune", "bench", "--file", FILE, "--op", op, "--spec", str(spec),
                                                      "--threads", threads, "--config", c, "--dir", f"/tmp/retune-ab-{v}"],
                                               capture_output=True, text=True).stdout.strip().splitlines()[-1]
                            res[v].append(float(o.split()[0]))
                            say(f"  round {len(res[v])} {v} {o}")

                wins = lambda: sum(n > o for o, n in zip(res["old"], res["new"]))
                rounds(ROUNDS)
                if 0 < wins() < ROUNDS:
                    say("  the rounds disagree: as many again")
                    rounds(ROUNDS)
                o, n = statistics.median(res["old"]), statistics.median(res["new"])
                put_back = n < GAIN * o or 2 * wins() <= len(res["new"])
                say(f"  {'entry put back' if put_back else 'new config kept'}: {o:.1f} -> {n:.1f} ({n / o:.3f}x), "
                    f"the new config ahead in {wins()} of {len(res['new'])} rounds")
            else:
                say("  kept the entry")
            if put_back:  # the entry as it was, figures and all
                blocks[i] = entry
                open(path, "w").write(head + "[[entry]]".join([""] + blocks))
    say("# FMA peak after:")
    peak(say)


if __name__ == "__main__":
    main()
