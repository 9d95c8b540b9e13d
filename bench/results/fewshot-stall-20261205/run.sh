#!/usr/bin/env bash
# few-shot 48 trials as a cold build, keep the logs
set -euo pipefail
cd /work/main
AT=/var/tmp/autotune-ci-target/release/cargo-autotune
for seed in 1 2; do
for w in conv7x7s2_relu:0 max_pool3x3s2:0 conv1x1_bias:0 conv1x1s2_bias:0 conv1x1s2_bias:2 conv3x3_relu:3 conv3x3s2_relu:0 conv3x3_add_relu:1; do
  d=/tmp/stall/$seed-${w/:/-}
  rm -rf $d
  AUTOTUNE_HISTORY= $AT autotune tune --file examples/resnet18/src/ops.rs --op "${w%:*}" --spec "${w#*:}" \
    --tuner few-shot --trials 48 --seconds 120 --threads 2 --no-transfer --seed $seed \
    --log $d/r.jsonl --dir $d/d --cache $d/cache --json > $d.json 2> $d.err || true
  echo "$seed $w $(python3 -c "import json;r=json.load(open('$d.json'));print(r['trials'],round(r['seconds'],1),round(r['best_gflops'],1))")"
done
done
