#!/usr/bin/env python3
"""ONNX Runtime's time per node inside its ResNet-18 pass (its profiler), to set beside
the example's `--layers` lines ("ms in the pass"): where the network loses to it.

Usage: ort_nodes.py MODEL_DIR THREADS   (MODEL_DIR: what `resnet18 --export DIR` writes)
Prints the median pass and each node's median kernel time in microseconds (60 passes,
the first 10 dropped), in execution order.
"""
import collections
import json
import os
import statistics
import sys
import tempfile

import onnxruntime as ort
from ort_bench import load, resnet18

model_dir, threads = sys.argv[1], int(sys.argv[2])
t = load(model_dir)
so = ort.SessionOptions()
so.intra_op_num_threads = threads
so.inter_op_num_threads = 1
so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
so.enable_profiling = True
so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
s = ort.InferenceSession(resnet18(t), so, providers=["CPUExecutionProvider"])
for _ in range(60):
    s.run(None, {"input": t["input"]})
events = json.load(open(s.end_profiling()))
runs = [e["dur"] for e in events if e.get("name") == "model_run"]
times, order = collections.defaultdict(list), []
for e in events:
    if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
        node = e["name"][: -len("_kernel_time")]
        if node not in times:
            order.append((node, e["args"].get("op_name")))
        times[node].append(e["dur"])
print(f"# onnxruntime {ort.__version__} threads={threads}: pass {statistics.median(runs[10:]):.0f} us (median)")
for node, op in order:
    print(f"{node:24s} {op:20s} {statistics.median(times[node][10:]):8.0f} us")
