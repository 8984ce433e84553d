#!/usr/bin/env bash
# mutation sweeps of the suite's seed programs on mtia-sim (the simulator's own runtime checks)
cd /tmp/mutm
source /work/main/.venv/bin/activate
for t in softmax rmsnorm layernorm silu_mul bucketize kmeans_assign gemm conv1d; do
  f=/work/main/benchmarks/tasks/$t/seed.kir
  timeout 300 kir search $t --seed $f --strategy sweep --proposer mutate --budget 25 --backend mtia-sim --db mtia.sqlite --name mut-$t-seed --workers 2 --timeout 120 > logs/$t.log 2>&1
  echo "$t $(tail -2 logs/$t.log | head -1)"
done
