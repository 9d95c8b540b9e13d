"""The twelve ResNet-18 conv layers C1-C12 of the AutoTVM paper's table, shared by the
peer suite's scripts (bench/peers.sh, ort_bench.py, peers_report.py, network_report.py),
with the parsing of the figures their logs share.
examples/resnet18/src/layers.rs holds the same table for the example's `--layers`.

`python3 bench/resnet18_layers.py` prints them as `C,H,K,R,stride,pad` for the C peers.
"""

import re

LAYERS = [  # name, C, H, K, R, stride, pad, relu (whether the network's conv has one)
    ("C1", 3, 224, 64, 7, 2, 3, True),
    ("C2", 64, 56, 64, 3, 1, 1, True),
    ("C3", 64, 56, 64, 1, 1, 0, False),
    ("C4", 64, 56, 128, 3, 2, 1, True),
    ("C5", 64, 56, 128, 1, 2, 0, False),
    ("C6", 128, 28, 128, 3, 1, 1, True),
    ("C7", 128, 28, 256, 3, 2, 1, True),
    ("C8", 128, 28, 256, 1, 2, 0, False),
    ("C9", 256, 14, 256, 3, 1, 1, True),
    ("C10", 256, 14, 512, 3, 2, 1, True),
    ("C11", 256, 14, 512, 1, 2, 0, False),
    ("C12", 512, 7, 512, 3, 1, 1, True),
]



def num(pattern, text):
    """The first group of `pattern` in `text` as a number, or None."""
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


def figures(sec, nt):
    """The ResNet-18 figures of one thread count's part of a peers.sh or network.sh log:
    the network's ms (the example's and ONNX Runtime's), and per layer name the example's
    (ms, GFLOP/s) and the peers' GFLOP/s (None where a line is missing)."""
    out = {
        "ours_ms": num(rf"network threads={nt}:\s+([\d.]+) ms", sec),
        "ort_ms": num(rf"RESULT ort net threads={nt} ms=([\d.]+)", sec),
        "layers": {},
    }
    for name, c, h, k, r, st, pad, _ in LAYERS:
        m = re.search(rf"layer {name} threads={nt}:\s+([\d.]+) ms\s+([\d.]+) GFLOP/s", sec)
        key = rf"threads={nt} C={c} H={h} W={h} K={k} R={r} S={r} stride={st} pad={pad} gflops_med=([\d.]+)"
        out["layers"][name] = {
            "ms": float(m.group(1)) if m else None,
            "ours": float(m.group(2)) if m else None,
            "im2col": num(r"peer=im2col_openblas " + key, sec),
            "onednn": num(r"peer=onednn-direct " + key, sec),
            "ort": num(rf"RESULT ort layer {name} threads={nt} ms=[\d.]+ gflops=([\d.]+)", sec),
        }
    return out


if __name__ == "__main__":
    print(" ".join(f"{c},{h},{k},{r},{st},{pad}" for _, c, h, k, r, st, pad, _ in LAYERS))
