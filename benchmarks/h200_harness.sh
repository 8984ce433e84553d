#!/usr/bin/env bash
# The harness on the lent H200: the hack corpus with every candidate on the GPU
# (KIR_HACK_DEVICE=cuda: Python candidates on the device, KIR ones through Triton, and the cases
# that exist only there: a side stream, device memory past the candidate's share), then two
# suite tasks' seed and tuned programs timed through `kir bench` against their peers. Wheels carried in build/whl
# (xdsl, lark, z3-solver, typer, rich and small dependencies) go to /tmp/site. Results under
# $OUT (or ./out). The wheels, fetched here once (Python 3.12 on x86-64 there):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d build/whl \
#     xdsl==0.75.0 lark==1.3.1 z3-solver==4.15.4.0 typer==0.29.2 rich==15.0.0 immutabledict ordered-set \
#     pydantic==2.13.4 pydantic_core==2.46.4 annotated-types typing-inspection annotated-doc shellingham \
#     typing-extensions
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/whl/*.whl || exit 1
chmod -R a+rX /tmp/site "$PWD"  # the candidates run as an unprivileged user: they read these
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
} | tee "$OUT/environment.txt"
KIR_HACK_DEVICE=cuda python3 -m pytest -q -p no:cacheprovider -n 4 -rfEs tests/agent/hacks 2>&1 | tee "$OUT/hacks-cuda.log"
echo "hacks rc=${PIPESTATUS[0]}" | tee -a "$OUT/environment.txt"
[[ "${H200_BENCH:-1}" == 0 ]] && exit 0
timeout 300 python3 -m agent.cli bench softmax gemm --program seed --program tuned --preset bench -o "$OUT/bench" \
  2>&1 | tee "$OUT/bench.log"
echo "bench rc=${PIPESTATUS[0]}" | tee -a "$OUT/environment.txt"
