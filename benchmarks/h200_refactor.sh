#!/usr/bin/env bash
# After the pipeline/registry/passes refactor, on the lent H200: the harness script (the hack
# corpus on the GPU, then `kir bench softmax gemm` with the cost model's prediction beside each
# time), and the tile-level warp_specialize GEMM (tests/lowering/programs/gemm_ws_tile.kir)
# lowered through the pass schedule to Gluon and to CUDA C++ and checked against the gemm task
# on both presets. Wheels as in h200_harness.sh (build/whl). Results under $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
OUT="$OUT/harness" bash benchmarks/h200_harness.sh
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
for backend in gluon cuda; do
  for preset in test bench; do
    params=()
    [[ $preset == test ]] && params=(-p BN=64)
    timeout 280 python3 -m agent.cli run tests/lowering/programs/gemm_ws_tile.kir --task gemm -b "$backend" \
      --preset "$preset" "${params[@]}" --json > "$OUT/gemm_ws_tile-$backend-$preset.json" 2> "$OUT/gemm_ws_tile-$backend-$preset.err"
    echo "gemm_ws_tile $backend $preset rc=$?" | tee -a "$OUT/passes.txt"
  done
done
