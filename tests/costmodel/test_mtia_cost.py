"""The cost model on mtia-sim (costmodel/mtia.py): its figures are the simulator's, and it ranks
variants as the simulator's cycles do."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from costmodel import CostModel, predict
from costmodel.mtia import Pe
from costmodel.spec import chip
from kir.parser import parse, parse_file
from kir.targets import spec

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "benchmarks" / "tasks"
HEADER = ROOT / "lowering" / "targets" / "mtia_sim" / "mtia_sim.hpp"


def header_constants() -> dict[str, float]:
    out = {}
    for name, value in re.findall(r"constexpr \w+ (k\w+) = ([\d.]+)", HEADER.read_text()):
        out[name] = float(value)
    out["kSramBytes"] = 384 * 1024
    return out


def test_the_cost_section_holds_the_simulators_figures():
    k = header_constants()
    c = chip("mtia-sim")
    pe = Pe.of(c, spec("mtia-sim").raw["cost"])
    assert pe.pes == k["kPEs"]
    assert pe.clock_hz == 1e9
    assert pe.device_bytes_per_clk == k["kDeviceBytesPerCycle"]
    assert pe.port_bytes_per_clk == k["kPortBytesPerCycle"]
    assert pe.burst == k["kBurst"]
    assert pe.latency == pytest.approx(k["kMemLatency"])
    assert pe.sram_bytes_per_clk == k["kSramBytesPerCycle"]
    assert pe.vec_lanes == k["kVecLanes"] and pe.vec_latency == k["kVecLatency"]
    assert pe.sfu_per_clk == k["kSfuPerCycle"] and pe.sfu_latency == k["kSfuLatency"]
    assert pe.red_per_clk == k["kRedPerCycle"] and pe.red_latency == k["kRedLatency"]
    assert pe.dpe_tile == k["kDpeTile"] and pe.dpe_latency == k["kDpeLatency"]
    assert (pe.dpe_cycles_16, pe.dpe_cycles_32) == (k["kDpeCycles16"], k["kDpeCycles32"])
    assert pe.issue_per_clk == 1
    assert pe.launch_cycles == pytest.approx(k["kLaunchCycles"])
    assert c.smem_per_sm == k["kSramBytes"]
    assert "PROVISIONAL" not in (ROOT / "kir/targets/mtia_sim.toml").read_text()


def test_port_share_follows_the_active_pes():
    pe = Pe.of(chip("mtia-sim"), spec("mtia-sim").raw["cost"])
    assert pe.rate(1) == 64 and pe.rate(10) == 64 and pe.rate(64) == 25 and pe.rate(1000) == 25


def test_predict_on_mtia_sim_is_an_estimate_with_engine_resources():
    program = parse_file(TASKS / "gemm" / "mtia.kir")
    est = predict(program, "mtia-sim", {"BM": 128, "BN": 128, "BK": 32}, {"M": 512, "N": 512, "K": 512})
    assert est.time_s > 0 and est.target == "mtia-sim"
    assert est.bottleneck == "dot-product engine"
    assert set(est.resources) >= {"vec", "sfu", "red", "dpe", "port", "control"}
    assert est.to_json()["counts"]["programs"] == 16
    # the DPE alone: 16 programs, one per PE, 4 x 4 x 16 blocks of 32 cycles each
    assert est.resources["dpe"] == pytest.approx(4 * 4 * 16 * 32 / 1e9)


@pytest.mark.parametrize("name", ["mtia", "seed"])
def test_the_matmul_flops_of_a_gemm_are_counted_on_mtia_sim(name):
    """`kir cost --target mtia-sim` printed 'matmul 0 FLOP' for a GEMM: the figure is the dots'
    2 M N K over every k-step and program, the same as for any other target."""
    program = parse_file(TASKS / "gemm" / f"{name}.kir")
    shapes = {"M": 512, "N": 256, "K": 1024}
    est = predict(program, "mtia-sim", None, shapes)
    assert est.counts["matmul_flops"] == 2 * 512 * 256 * 1024
    assert est.counts["matmul_flops"] == predict(program, "sm_90", None, shapes).counts["matmul_flops"]


def test_calibrated_scale_applies_to_mtia_sim():
    program = parse_file(TASKS / "softmax" / "mtia.kir")
    args = ("mtia-sim", {"BLOCK": 2048, "R": 16}, {"M": 1024, "N": 2048})
    base = CostModel().predict(program, *args).time_s
    scaled = CostModel({"mtia_sim": {"scale": 2.0}}).predict(program, *args).time_s
    assert scaled == pytest.approx(2 * base)


def single_buffered(file: Path):
    return parse(file.read_text().replace("cp.async.wait(1)", "cp.async.wait(0)"), file=str(file))


def test_double_buffering_is_predicted_to_pay():
    shapes, params = {"M": 1024, "N": 2048}, {"BLOCK": 2048, "R": 16}
    file = TASKS / "softmax" / "mtia.kir"
    double = predict(parse_file(file), "mtia-sim", params, shapes).time_s
    single = predict(single_buffered(file), "mtia-sim", params, shapes).time_s
    assert double < single


def test_direct_loads_stall_the_control_processor():
    est = predict(parse_file(TASKS / "softmax" / "seed.kir"), "mtia-sim", {"BLOCK": 2048}, {"M": 64, "N": 2048})
    assert est.resources["control"] > est.resources["port"]


CASES = [
    ("gemm", "mtia", {"BM": 32, "BN": 32, "BK": 16}, False),
    ("gemm", "mtia", {"BM": 64, "BN": 64, "BK": 32}, False),
    ("gemm", "mtia", {"BM": 128, "BN": 128, "BK": 32}, False),
    ("gemm", "mtia", {"BM": 128, "BN": 128, "BK": 32}, True),
    ("gemm", "seed", {"BM": 32, "BN": 32, "BK": 32}, False),
    ("gemm", "seed", {"BM": 64, "BN": 64, "BK": 64}, False),
]


def test_ranks_gemm_variants_as_the_simulator_does():
    pytest.importorskip("ctypes")
    from lowering.targets.mtia_sim.compile import gxx
    from lowering.targets.mtia_sim.runtime import run_mtia

    if gxx() is None:
        pytest.skip("no g++")
    shapes = {"M": 256, "N": 256, "K": 256}
    rng = np.random.default_rng(0)
    inputs = {
        "a": rng.standard_normal((256, 256)).astype(np.float32),
        "b": rng.standard_normal((256, 256)).astype(np.float32),
    }
    from kir.dtypes import DTYPES

    inputs = {k: v.astype(DTYPES["bf16"].numpy) for k, v in inputs.items()}
    predicted, simulated = [], []
    for task, which, params, single in CASES:
        file = TASKS / task / f"{which}.kir"
        program = single_buffered(file) if single else parse_file(file)
        predicted.append(predict(program, "mtia-sim", params, shapes).time_s)
        simulated.append(run_mtia(program, dict(inputs), params).cycles / 1e9)
    n = len(CASES)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if simulated[i] != simulated[j]]
    right = sum((predicted[i] - predicted[j]) * (simulated[i] - simulated[j]) > 0 for i, j in pairs)
    assert right / len(pairs) >= 0.8
    errors = [abs(p - s) / s for p, s in zip(predicted, simulated, strict=True)]
    assert float(np.median(errors)) < 0.2


def test_a_program_written_for_another_target_gets_one_located_warning():
    """The Hopper GEMM costed on mtia-sim and on gfx942: one `cost.target` warning at the first
    of what the verifier's target rules (handed in as `checks`) find missing there (mbarriers,
    warpgroups, TMA...); on its own target, and for a program written for mtia-sim, none."""
    from pathlib import Path

    from costmodel import predict
    from kir.parser import parse_file
    from verifier.facts import CHECKS

    root = Path(__file__).resolve().parents[2]
    hopper = parse_file(root / "benchmarks/tasks/gemm/persistent.kir")
    shapes = {"M": 1024, "N": 1024, "K": 1024}
    for target in ("mtia-sim", "gfx942"):
        (w,) = [d for d in predict(hopper, target, shapes=shapes, checks=CHECKS).hints if d.rule == "cost.target"]
        assert w.severity == "warning" and f"on {target}" in w.message and "more findings" in w.message
        assert w.span is not None and w.related
    assert not [d for d in predict(hopper, "sm_90", shapes=shapes, checks=CHECKS).hints if d.rule == "cost.target"]
    mtia = parse_file(root / "benchmarks/tasks/softmax/mtia.kir")
    assert not predict(mtia, "mtia-sim", shapes={"M": 256, "N": 1024}, checks=CHECKS).hints


def test_a_persistent_grid_over_few_tiles_takes_its_busiest_program():
    # gemm's 4 tiles walked by 64 persistent programs: 4 PEs do all the work. The kernel takes
    # the busiest PE, not a 64th of the tiles' work on each (predicted 4178 cycles against the
    # simulator's 20042 before)
    pytest.importorskip("ctypes")
    import tactics
    from kir.dtypes import DTYPES
    from lowering.targets.mtia_sim.compile import gxx
    from lowering.targets.mtia_sim.runtime import run_mtia

    if gxx() is None:
        pytest.skip("no g++")
    seed = parse_file(TASKS / "gemm" / "seed.kir").with_params(BM=32, BN=32, BK=16)
    walked = tactics.get("persistent").apply(seed, programs=64)
    rng = np.random.default_rng(0)
    inputs = {"a": rng.standard_normal((128, 256)), "b": rng.standard_normal((256, 64))}
    inputs = {k: v.astype(DTYPES["bf16"].numpy) for k, v in inputs.items()}
    predicted = predict(walked, "mtia-sim", shapes={"M": 128, "N": 64, "K": 256}).time_s * 1e9
    simulated = run_mtia(walked, inputs, dict(walked.params)).cycles
    assert abs(predicted - simulated) / simulated < 0.15, (predicted, simulated)
