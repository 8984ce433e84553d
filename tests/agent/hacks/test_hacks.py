"""The hack corpus as tests: every known way of fooling the harness is a small cheating candidate
(tests/agent/hacks/solutions.py) that must be rejected with a named rule, beside an honest twin
that must pass; after them the checkout is as it was, no process of a candidate runs, and this
process (the caller) is alive.

The jobs run through `run_job`, as `kir run` runs them (see `Corpus` for how many at a time);
each test reads its own record.
"""

from __future__ import annotations

import os
import random
import secrets
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agent.harness.isolate import run_job
from agent.harness.sandbox import processes
from tests.agent.hacks import solutions as S

ROOT = Path(__file__).resolve().parents[3]
TASK = ROOT / "tests" / "agent" / "tasks" / "scale"
TOKEN = f"kirhack{secrets.token_hex(4)}"
# KIR_HACK_DEVICE=cuda runs the corpus on a GPU (Python candidates on the device, KIR ones through
# Triton), with the cases that exist only there (side streams, device memory)
DEVICE = os.environ.get("KIR_HACK_DEVICE", "cpu")
CUDA = DEVICE.startswith("cuda")
TIMED = {"time": {"sets": 2, "runs": 8, "min_runs": 4, "budget_s": 0.5, "warmup": 2, "peers": []}}
WATCHED = [ROOT / "agent" / "harness" / "correctness.py", TASK / "reference.py", TASK / "task.toml"]


def _fixed_shape_seed() -> int:
    """A seed whose varied round draws N > 16 (the protocol's first draw for the last seed: see
    correctness.draw_shape), where the program right only for N = 16 leaves elements unwritten."""
    for seed in range(1, 1000):
        rng = random.Random(f"vary-{seed}")
        shape = {
            name: rng.randrange(lo, hi + 1, step) for name, (lo, hi, step) in {"M": (1, 8, 1), "N": (1, 32, 1)}.items()
        }
        if shape["N"] > 16:
            return seed
    raise AssertionError("no seed draws N > 16")


# name -> (job, what the record must say)
CASES: dict[str, tuple[dict, dict]] = {}


def python_case(name: str, source: str, expect: dict, **extra) -> None:
    CASES[name] = ({"kind": "python", "source": source, **extra}, expect)


def kir_case(name: str, text: str, expect: dict, **extra) -> None:
    CASES[name] = ({"kind": "kir", "text": text, **extra}, expect)


for _name, _rule in {
    "forged-record": "harness.forged-record",
    "forged-record-atexit": "harness.forged-record",
    "patched-any": "harness.mismatch",
    "patched-correctness": "harness.mismatch",
    "lying-subclass": "harness.mismatch",
    "reference-via-gc": "harness.mismatch",
    "reference-via-frames": "harness.mismatch",
    "reference-filled-1e30": "harness.mismatch",
    "replaced-model-forward": "harness.mismatch",
    "zeroed-inputs-and-copies": "harness.input-mutated",
    "rewritten-harness": "harness.mismatch",
    "files-outside": "harness.escaped",
    "detached-child": "harness.escaped",
    "kill-the-checker": "harness.mismatch",
    "checker-memory": "harness.mismatch",
    "every-descriptor": "harness.protocol",
    "flooded-log": "harness.mismatch",
    "exit-in-solution": "harness.no-record",
}.items():
    python_case(_name, S.PYTHON[_name], {"rule": _rule})
python_case("unbounded-allocation", S.PYTHON["unbounded-allocation"], {"rule": "harness.out-of-memory"}, memory_mb=1536)
for _name in ("only-under-check", "cached-per-instance", "cached-per-tensor"):
    python_case(_name, S.PYTHON[_name], {"rule": "harness.timed-mismatch"}, **TIMED)
# on a GPU the timer reads device events, not the patched host clock: the times stay true there
python_case(
    "patched-harness-clock",
    S.PYTHON["patched-harness-clock"],
    {"ok": True, "min_ms": 100.0} if CUDA else {"rule": "harness.timing-forged"},
    **TIMED,
)
python_case("syntax-error", S.SYNTAX_ERROR, {"rule": "harness.candidate-error", "stage": "load"})
kir_case("out-parameter", S.KIR["out-parameter"], {"rule": "harness.bind-out"}, verify=False)
kir_case("written-parameter", S.KIR["written-parameter"], {"rule": "harness.parameter-mutated"}, verify=False)
kir_case("written-input", S.KIR["written-input"], {"rule": "harness.input-mutated"}, verify=False)
kir_case(
    "preset-shape-only", S.KIR["preset-shape-only"], {"rule": "harness.nan"}, verify=False, seeds=[_fixed_shape_seed()]
)

for _name, _source in S.TWINS.items():
    python_case(f"twin-{_name}", _source, {"ok": True})
python_case("twin-bounded-allocation-limited", S.TWINS["bounded-allocation"], {"ok": True}, memory_mb=1536)
python_case("twin-timed", S.TWINS["honest"], {"ok": True}, **TIMED)
# names patched at import that the timer took before: the times stay true (a 20 ms sleep each)
python_case("patched-clocks", S.PATCHED_CLOCKS, {"ok": True, "min_ms": 15.0}, **TIMED)
for _name, _text in S.KIR_TWINS.items():
    kir_case(f"twin-kir-{_name}", _text, {"ok": True})
if CUDA:
    python_case("side-stream", S.GPU["side-stream"], {"rule": "harness.side-stream"}, **TIMED)
    python_case("patched-harness-events", S.GPU["patched-harness-events"], {"rule": "harness.timing-forged"}, **TIMED)
    python_case("unbounded-device-allocation", S.GPU["unbounded-device-allocation"], {"rule": "harness.out-of-memory"})
    python_case("twin-on-stream", S.GPU_TWINS["on-stream"], {"ok": True, "min_ms": 1.0}, **TIMED)
    python_case("twin-side-stream-joined", S.GPU_TWINS["side-stream-joined"], {"ok": True, "min_ms": 1.0}, **TIMED)
    python_case("twin-timing-lock-out-of-reach", S.GPU_TWINS["timing-lock-out-of-reach"], {"ok": True}, **TIMED)

CHEATS = [name for name, (_, expect) in CASES.items() if not expect.get("ok")]
TWINS = [name for name, (_, expect) in CASES.items() if expect.get("ok")]


def _job(name: str, folder: Path) -> dict:
    spec, _ = CASES[name]
    spec = dict(spec)
    kind = spec.pop("kind")
    job = {"task": str(TASK), "preset": "test", "seeds": spec.pop("seeds", [1, 2]), "device": DEVICE}
    if kind == "python":
        file = folder / f"{name}.py"
        file.write_text(spec.pop("source").replace("{token}", TOKEN))
        job["candidate"] = {"kind": "python", "file": str(file)}
    else:
        backend = "triton" if CUDA else "interp"
        job["candidate"] = {"kind": "kir", "text": spec.pop("text"), "backend": backend, "params": {"BLOCK": 32}}
    job.update(spec)
    return job


def _digest() -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in WATCHED}


def _git_status() -> list[str]:
    out = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=False)
    return out.stdout.splitlines()


class Corpus:
    """The records of the cases, run on first use. In one pytest process every selected case is
    started at once, two at a time (CI has two cores); under pytest-xdist (`-n auto`, which
    shares this module's tests among its workers) each worker runs only the cases it is asked
    for, the workers being the parallelism."""

    def __init__(self, selected: set[str], folder: Path):
        self.folder = folder
        self.victim = Path(f"/tmp/kir-victim-{TOKEN}")
        self.victim.write_text("keep me")
        os.chmod(self.victim, 0o644)
        self.before = {"digest": _digest(), "status": _git_status()}
        self.pool = ThreadPoolExecutor(max_workers=2)
        self.futures: dict = {}
        if not os.environ.get("PYTEST_XDIST_WORKER"):
            for name in sorted(selected):
                self._submit(name)

    def _submit(self, name: str):
        if name not in self.futures:
            self.futures[name] = self.pool.submit(run_job, _job(name, self.folder), 120)
        return self.futures[name]

    def record(self, name: str) -> dict:
        return self._submit(name).result()

    def done(self) -> dict[str, dict]:
        return {name: f.result() for name, f in self.futures.items()}


@pytest.fixture(scope="module")
def corpus(request, tmp_path_factory):
    selected = {
        item.callspec.params["name"]
        for item in request.session.items
        if hasattr(item, "callspec") and "name" in item.callspec.params and item.module.__name__ == __name__
    } or set(CASES)
    runs = Corpus(selected, tmp_path_factory.mktemp("hacks"))
    try:
        yield runs
    finally:
        runs.pool.shutdown(wait=True)
        runs.victim.unlink(missing_ok=True)
        Path(f"/tmp/kir-hack-{TOKEN}").unlink(missing_ok=True)
        for pid in _token_processes():  # an old harness leaves them: do not leave them to CI
            os.kill(pid, signal.SIGKILL)


def _token_processes() -> list[int]:
    found = []
    for pid in processes():
        try:
            if TOKEN.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def rules(record: dict) -> list[str]:
    return [d["rule"] for d in record["diagnostics"]]


def _nothing_of_the_candidate_runs(record: dict) -> None:
    uid = record.get("metrics", {}).get("candidate_uid")
    if uid is not None:
        left = [pid for pid, p in processes().items() if p["uid"] == uid and p["state"] not in ("Z", "X")]
        assert not left, f"processes of the candidate's uid {uid} still run: {left}"


@pytest.mark.parametrize("name", CHEATS)
def test_a_cheat_is_rejected_with_its_rule(corpus, name):
    record = corpus.record(name)
    expect = CASES[name][1]
    assert not record["ok"], record
    assert expect["rule"] in rules(record), record
    if "stage" in expect:
        assert record["stage"] == expect["stage"], record
    _nothing_of_the_candidate_runs(record)


@pytest.mark.parametrize("name", TWINS)
def test_an_honest_twin_passes(corpus, name):
    record = corpus.record(name)
    assert record["ok"] and record["stage"] == "done", record
    if "min_ms" in CASES[name][1]:
        assert record["metrics"]["ms"] >= CASES[name][1]["min_ms"], record["metrics"]
    _nothing_of_the_candidate_runs(record)


def test_the_candidate_runs_contained_as_root(corpus):
    """CI runs as root: there every candidate runs under a uid of its own."""
    if os.geteuid() != 0:
        pytest.skip("not root: the user-namespace fallback applies")
    corpus.record("twin-honest")
    for name, record in corpus.done().items():
        if record.get("metrics", {}).get("containment") is not None:
            assert record["metrics"]["containment"] == "uid", (name, record["metrics"])


def test_the_checkout_is_as_it_was(corpus):
    for name in ("rewritten-harness", "files-outside", "patched-correctness"):  # those that write
        corpus.record(name)
    corpus.done()
    assert _digest() == corpus.before["digest"]
    status = _git_status()
    assert not [line for line in status if "kirhack" in line or "kir_hack" in line or "solution.py" in line]
    if not corpus.before["status"]:  # CI: a clean checkout stays clean
        assert status == []


def test_a_harness_rewritten_by_a_candidate_still_rejects_the_next_wrong_one(corpus, tmp_path):
    assert not corpus.record("rewritten-harness")["ok"]
    assert "_compare = lambda" not in (ROOT / "agent" / "harness" / "correctness.py").read_text()
    wrong = tmp_path / "wrong.py"
    wrong.write_text(S.cheat("return torch.zeros_like(x)"))
    job = {"task": str(TASK), "candidate": {"kind": "python", "file": str(wrong)}, "preset": "test", "seeds": [1]}
    record = run_job(job, timeout=120)
    assert not record["ok"] and "harness.mismatch" in rules(record)


def test_files_outside_the_job_folder_are_neither_left_nor_deleted(corpus):
    corpus.record("files-outside")
    assert corpus.victim.read_text() == "keep me"
    assert not Path(f"/tmp/kir-hack-{TOKEN}").exists()


def test_a_detached_child_is_killed(corpus):
    corpus.record("detached-child")
    assert not _token_processes()


def test_the_log_is_capped_in_characters(corpus):
    record = corpus.record("flooded-log")
    assert len(record["log_tail"]) <= 10_000 and "characters cut" in record["log_tail"]


def test_a_syntax_error_is_located_in_the_solution(corpus):
    record = corpus.record("syntax-error")
    (diag,) = record["diagnostics"]
    assert diag["file"].endswith("syntax-error.py") and diag["line"] == 6, diag
    assert "SyntaxError" in diag["message"]


def test_the_varied_round_keeps_a_shape_the_program_fixes(corpus):
    varied = corpus.record("twin-kir-fixed-by-where")["metrics"]["varied"]
    assert varied["shape"].get("N", 16) == 16 and varied["shape"].get("M") not in (None, 4)
    assert corpus.record("twin-kir-seed")["metrics"]["varied"]["shape"]


def test_a_reference_that_exits_at_import_does_not_end_the_caller(tmp_path):
    """`kir run` loads the task in its own process to plan the job; the reference is imported in
    the checker only."""
    from agent.cli import run_command

    task = tmp_path / "exits"
    task.mkdir()
    (task / "reference.py").write_text(
        (TASK / "reference.py").read_text().replace('"""A row', 'import os\nos._exit(7)\n"""A row', 1)
    )
    (task / "task.toml").write_text((TASK / "task.toml").read_text())
    (task / "seed.kir").write_text(S.KIR_SEED)
    start = time.monotonic()
    record, _ = run_command(str(task / "seed.kir"), str(task), "interp", "test", {}, [1], 60.0, None)
    assert time.monotonic() - start < 60
    verdict = record.verdict or {}
    assert not record.ok and verdict.get("stage") == "crash", record
    assert [d.rule for d in record.errors] == ["harness.no-record"], record
    assert "status 7" in record.errors[0].message


NON_ROOT = """
import json, sys
sys.path.insert(0, {root!r})
from agent.harness.isolate import run_job
jobs = json.loads(sys.argv[1])
print(json.dumps({{name: run_job(job, 120) for name, job in jobs.items()}}))
"""


def test_without_root_the_candidate_sees_a_read_only_world(tmp_path):
    """The fallback where the caller is not root: a user and mount namespace in which everything
    but the job folder is read-only (here a uid other than 0 mapped onto root's, so that the
    interpreter under /root stays readable, as a user's own would be)."""
    import json
    import shutil

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root to map a user of its own")
    probe = subprocess.run(["unshare", "-U", "--map-user=1000", "--map-group=1000", "true"], check=False)
    if probe.returncode != 0:
        pytest.skip("no user namespaces here")
    names = ["rewritten-harness", "files-outside", "detached-child", "twin-own-files"]
    jobs = {name: {**_job(name, tmp_path), "device": "cpu"} for name in names}  # the fallback of a CPU machine
    victim = Path(f"/tmp/kir-victim-{TOKEN}")
    victim.write_text("keep me")
    before = _digest()
    try:
        out = subprocess.run(
            [
                "unshare",
                "-U",
                "--map-user=1000",
                "--map-group=1000",
                os.sys.executable,
                "-c",
                NON_ROOT.format(root=str(ROOT)),
                json.dumps(jobs),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        records = json.loads(out.stdout.splitlines()[-1])
        assert all(r["metrics"].get("containment") == "userns" for r in records.values()), records
        assert not records["rewritten-harness"]["ok"] and _digest() == before
        assert victim.read_text() == "keep me" and not Path(f"/tmp/kir-hack-{TOKEN}").exists()
        assert "harness.escaped" in rules(records["detached-child"]) and not _token_processes()
        assert records["twin-own-files"]["ok"], records["twin-own-files"]
    finally:
        victim.unlink(missing_ok=True)
        for pid in _token_processes():
            os.kill(pid, signal.SIGKILL)
