"""How much of a search's compile time goes to candidates with large C, and
whether any of them was a workload's best: reads the lines of
cargo-autotune's `source_sizes` example (workload, GFLOP/s, bytes of C) and,
for rules "over RATIO x the workload's median size and over FLOOR bytes",
prints the share of estimated compile time those candidates took and the best
each workload keeps without them (as a share of its best). Compile time is
estimated as 0.05 s + bytes / 105 KB/s, fitted to gcc -O3 on ResNet-18's
28x28 conv candidates on an Intel Xeon (0.2 s at 26 KB, 0.55 s at 70 KB,
1.2 s at 130 KB, 1.9 s at 200 KB)."""
import collections
import statistics
import sys

trials = collections.defaultdict(list)
for line in open(sys.argv[1]):
    w, g, n = line.rstrip("\n").split("\t")
    if int(n) > 0:
        trials[w].append((float(g), int(n)))


def seconds(n):
    return 0.05 + n / 105e3


print(f"{len(trials)} workloads, {sum(map(len, trials.values()))} trials")
print(f"{'rule':<26} {'large trials':>12} {'compile time':>12} {'losing >1%':>10} {'worst kept':>10}")
for ratio in (1.5, 2.0, 3.0):
    for floor in (0, 32 << 10, 64 << 10):
        total = large = 0.0
        shares = []
        n_large = n_all = 0
        for w, t in trials.items():
            limit = max(ratio * statistics.median(n for _, n in t), floor)
            best = max(g for g, _ in t)
            kept = max([g for g, n in t if n <= limit] or [0.0])
            shares.append((kept / best if best > 0 else 1.0, w))
            for g, n in t:
                total += seconds(n)
                n_all += 1
                if n > limit:
                    large += seconds(n)
                    n_large += 1
        worst = min(shares)
        print(f"{ratio}x median, > {floor >> 10:>2} KiB   {n_large / n_all:>12.2f} {large / total:>12.2f} "
              f"{sum(1 for s, _ in shares if s < 0.99):>10} {worst[0]:>10.3f}  {worst[1] if worst[0] < 0.99 else ''}")
print()
print("per workload (2x median, > 32 KiB): median KiB, best's size / median, large trials, best kept")
for w, t in sorted(trials.items()):
    med = statistics.median(n for _, n in t)
    best = max(t)
    limit = max(2 * med, 32 << 10)
    kept = max([g for g, n in t if n <= limit] or [0.0]) / best[0] if best[0] > 0 else 1.0
    print(f"  {w[:52]:<52} {med / 1024:6.1f} {best[1] / med:5.2f} {sum(1 for _, n in t if n > limit):3d} {kept:.3f}")
