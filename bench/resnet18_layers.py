"""The twelve ResNet-18 conv layers C1-C12 of the AutoTVM paper's table, shared by the
peer suite's scripts (bench/peers.sh, ort_bench.py, peers_report.py).
examples/resnet18/src/layers.rs holds the same table for the example's `--layers`.

`python3 bench/resnet18_layers.py` prints them as `C,H,K,R,stride,pad` for the C peers.
"""

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

if __name__ == "__main__":
    print(" ".join(f"{c},{h},{k},{r},{st},{pad}" for _, c, h, k, r, st, pad, _ in LAYERS))
