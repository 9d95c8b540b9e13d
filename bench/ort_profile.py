#!/usr/bin/env python3
"""Where ONNX Runtime spends a ResNet-18 pass, node by node (issue 19): the network of
bench/ort_bench.py run with ONNX Runtime's profiler on, PASSES passes after warm-up, and
each node's median time in the pass printed in graph order, beside the whole pass. The
example's own in-pass times are `resnet18 --layers` ("in the pass"); comparing the two
says which layers lose in a network what they do not lose timed alone.

Usage: ort_profile.py MODEL_DIR THREADS [PASSES]   (MODEL_DIR from `resnet18 --export`)
"""
import json
import os
import statistics
import sys
import tempfile

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_bench import load, resnet18, session  # noqa: E402

# Passes run before the timed ones, and left out of every median.
WARMUP = 5


def main():
    model_dir, threads = sys.argv[1], int(sys.argv[2])
    passes = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        s = session(resnet18(load(model_dir)), threads, profile=os.path.join(tmp, "ort"))
        name = s.get_inputs()[0].name
        # The profile holds the warm-up passes too; they are left out below.
        for _ in range(WARMUP + passes):
            s.run(None, {name: x})
        events = json.load(open(s.end_profiling()))
    runs = [e["dur"] for e in events if e.get("name") == "model_run"][WARMUP:]
    nodes = {}
    order = []
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        n = e["name"][: -len("_kernel_time")]
        if n not in nodes:
            nodes[n] = (e["args"].get("op_name", "?"), [])
            order.append(n)
        nodes[n][1].append(e["dur"])
    print(f"# ONNX Runtime {ort.__version__} profile, {threads} thread(s), {len(runs)} passes: "
          f"pass median {statistics.median(runs) / 1000:.3f} ms")
    total = 0.0
    for n in order:
        op, durs = nodes[n]
        med = statistics.median(durs[WARMUP:] if len(durs) > WARMUP else durs) / 1000
        total += med
        print(f"{n:40s} {op:22s} {med:8.3f} ms")
    print(f"# sum of the nodes' medians {total:.3f} ms")


if __name__ == "__main__":
    main()
