#!/usr/bin/env python3
"""ONNX Runtime peer of bench/peers.sh: batch-1 ResNet-18 and its conv layers C1-C12.

The network is built as an ONNX graph from the weights `resnet18 --export DIR` writes
(batch norm already folded, as in the Rust example), so both run the same network on
the same input; its logits are compared with the example's. Each layer is a one-node
model (Conv + bias, and ReLU where the network has one) with random data.

Usage: ort_bench.py MODEL_DIR THREADS
Prints `RESULT ort ...` lines (median of repeats, like the Rust example).
"""
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from resnet18_layers import LAYERS


def load(model_dir):
    """The tensors of resnet18.bin, named and shaped by resnet18.txt."""
    raw = np.fromfile(f"{model_dir}/resnet18.bin", dtype="<f4")
    tensors, at = {}, 0
    for line in open(f"{model_dir}/resnet18.txt"):
        name, dims = line.split()
        shape = [int(d) for d in dims.split("x")]
        n = int(np.prod(shape))
        tensors[name] = raw[at : at + n].reshape(shape)
        at += n
    assert at == raw.size, "resnet18.bin does not match resnet18.txt"
    return tensors


class Graph:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def tmp(self):
        self.n += 1
        return f"t{self.n}"

    def node(self, op, inputs, **attrs):
        out = self.tmp()
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name))
        return name

    def conv(self, x, w, b, stride, pad):
        k = w.shape[2] if w.ndim == 4 else 1
        wn = self.init(f"w{self.n}_{id(w)}", w if w.ndim == 4 else w.reshape(*w.shape, 1, 1))
        bn = self.init(f"b{self.n}_{id(b)}", b)
        return self.node("Conv", [x, wn, bn], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)

    def model(self, inp, out, in_shape, out_shape):
        g = helper.make_graph(
            self.nodes,
            "g",
            [helper.make_tensor_value_info(inp, TensorProto.FLOAT, in_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)],
            self.inits,
        )
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        onnx.checker.check_model(m)
        return m.SerializeToString()


def resnet18(t):
    g = Graph()
    x = g.node("Relu", [g.conv("input", t["stem.w"], t["stem.b"], 2, 3)])
    x = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for i in range(8):
        p = f"block{i}"
        down = f"{p}.down.w" in t
        y = g.node("Relu", [g.conv(x, t[f"{p}.conv1.w"], t[f"{p}.conv1.b"], 2 if down else 1, 1)])
        y = g.conv(y, t[f"{p}.conv2.w"], t[f"{p}.conv2.b"], 1, 1)
        short = g.conv(x, t[f"{p}.down.w"], t[f"{p}.down.b"], 2, 0) if down else x
        x = g.node("Relu", [g.node("Add", [y, short])])
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])], axis=1)
    x = g.node("Gemm", [x, g.init("fc.w", t["fc.w"]), g.init("fc.b", t["fc.b"])], transB=1)
    return g.model("input", x, [1, 3, 224, 224], [1, 1000])


def layer(c, h, k, r, stride, pad, relu, rng):
    g = Graph()
    y = g.conv("x", rng.uniform(-1, 1, (k, c, r, r)), rng.uniform(-1, 1, k), stride, pad)
    if relu:
        y = g.node("Relu", [y])
    o = (h + 2 * pad - r) // stride + 1
    return g.model("x", y, [1, c, h, h], [1, k, o, o])


def session(model, threads, profile=None):
    """A session as every figure here is timed with; `profile`: a file prefix for
    ONNX Runtime's profiler (bench/ort_profile.py)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if profile:
        so.enable_profiling = True
        so.profile_file_prefix = profile
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def median_time(f, min_secs, min_samples):
    """Median seconds per call, as the Rust example measures (two warm-up calls)."""
    f()
    f()
    samples, start = [], time.perf_counter()
    while len(samples) < min_samples or (time.perf_counter() - start < min_secs and len(samples) < 1000):
        t = time.perf_counter()
        f()
        samples.append(time.perf_counter() - t)
    return sorted(samples)[len(samples) // 2]


def main():
    model_dir, threads = sys.argv[1], int(sys.argv[2])
    t = load(model_dir)
    print(f"# onnxruntime {ort.__version__} onnx {onnx.__version__} threads={threads} "
          f"providers={ort.get_available_providers()}")
    net = session(resnet18(t), threads)
    feed = {"input": t["input"]}
    logits = net.run(None, feed)[0]
    ours = t["logits"]
    err = float(np.abs(logits - ours).max())
    scale = float(np.abs(ours).max())
    same = int(logits.argmax()) == int(ours.argmax())
    print(f"RESULT ort check max_abs_diff={err:.2e} max_abs_logit={scale:.2f} same_class={same}")
    if not (err <= 1e-3 * scale and same):
        sys.exit("ort_bench: ONNX Runtime's logits differ from the example's: not the same network")
    secs = median_time(lambda: net.run(None, feed), 3.0, 20)
    print(f"RESULT ort net threads={threads} ms={secs * 1e3:.3f}")
    rng = np.random.default_rng(7)
    for name, c, h, k, r, stride, pad, relu in LAYERS:
        s = session(layer(c, h, k, r, stride, pad, relu, rng), threads)
        x = {"x": rng.uniform(-1, 1, (1, c, h, h)).astype(np.float32)}
        secs = median_time(lambda: s.run(None, x), 0.5, 20)
        o = (h + 2 * pad - r) // stride + 1
        gflops = 2.0 * k * o * o * c * r * r / secs / 1e9
        print(f"RESULT ort layer {name} threads={threads} ms={secs * 1e3:.3f} gflops={gflops:.1f}")


if __name__ == "__main__":
    main()
