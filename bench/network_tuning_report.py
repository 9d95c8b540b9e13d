"""One run of bench/network-tuning.sh: per workload its trials, seconds, the split of
those seconds and its best GFLOP/s; then the totals and the network's estimated time
at 2 threads (each workload's best trial, in seconds per call, times its calls in
one ResNet-18 pass; the pools and the classifier included).

    python3 bench/network_tuning_report.py RUN_DIR OP:SPEC...
"""
import json
import sys

# Calls per pass of examples/resnet18 (src/net.rs): two basic blocks per stage, the
# first of stages 2-4 strided with a 1x1 shortcut.
CALLS = {
    "conv7x7s2_relu[C3 H224 W224 K64]": 1,
    "max_pool3x3s2[C64 H112 W112]": 1,
    "conv3x3_relu[C64 H56 W56 K64]": 2,
    "conv3x3_add_relu[C64 H56 W56 K64]": 2,
    "conv3x3s2_relu[C64 H56 W56 K128]": 1,
    "conv1x1s2_bias[C64 H56 W56 K128]": 1,
    "conv3x3_relu[C128 H28 W28 K128]": 1,
    "conv3x3_add_relu[C128 H28 W28 K128]": 2,
    "conv3x3s2_relu[C128 H28 W28 K256]": 1,
    "conv1x1s2_bias[C128 H28 W28 K256]": 1,
    "conv3x3_relu[C256 H14 W14 K256]": 1,
    "conv3x3_add_relu[C256 H14 W14 K256]": 2,
    "conv3x3s2_relu[C256 H14 W14 K512]": 1,
    "conv1x1s2_bias[C256 H14 W14 K512]": 1,
    "conv3x3_relu[C512 H7 W7 K512]": 1,
    "conv3x3_add_relu[C512 H7 W7 K512]": 2,
    "global_avg_pool[C512 H7 W7]": 1,
    "dense_bias[K512 N1000]": 1,
}


def main():
    run, workloads = sys.argv[1], sys.argv[2:]
    best_call = {}
    for op in {w.split(":")[0] for w in workloads}:
        for line in open(f"{run}/records/{op}.jsonl"):
            r = json.loads(line)
            if r.get("gflops") and r.get("seconds"):
                w = r["workload"]
                best_call[w] = min(best_call.get(w, 1e9), r["seconds"])
    print("%-40s %6s %7s %7s %6s %6s %8s" % ("workload", "trials", "s", "compile", "tuner", "rest", "GFLOP/s"))
    tot = [0, 0.0, 0.0, 0.0]
    for w in workloads:
        op, spec = w.split(":")
        r = json.load(open(f"{run}/{op}-{spec}.json"))
        s, c, t, n = r["seconds"], r["compile_seconds"], r["tuner_seconds"], r["trials"]
        for i, v in enumerate((n, s, c, t)):
            tot[i] += v
        print("%-40s %6d %7.1f %7.1f %6.1f %6.1f %8.1f" % (r["workload"], n, s, c, t, s - c - t, r["best_gflops"]))
    n, s, c, t = tot
    print("%-40s %6d %7.1f %7.1f %6.1f %6.1f" % ("total", n, s, c, t, s - c - t))
    print("shares: compile %.0f%%, tuner %.0f%%, checking/timing/re-timing %.0f%%" % (100 * c / s, 100 * t / s, 100 * (s - c - t) / s))
    missing = [w for w in CALLS if w not in best_call]
    net = sum(k * best_call[w] for w, k in CALLS.items() if w in best_call)
    print("network (2 threads, estimated from the best trials): %.2f ms%s" % (1e3 * net, f"; missing {missing}" if missing else ""))


main()
