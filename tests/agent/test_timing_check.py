"""The checker's reading of a candidate's timed runs (`agent.harness.worker._check_times`): a
report the checker's clock contradicts only by taking longer (a stalled host) is timed again; a
report of more time than passed, or of no durations, fails at once."""

from __future__ import annotations

from types import SimpleNamespace

from agent.harness.worker import _check_times


def _fail(rule, message, extra=None):
    return {"failed": (rule, message)}


TS = SimpleNamespace(sets=[0, 1, 2], set_bytes=lambda: 1 << 20, device="cuda:0")


def test_times_the_clock_agrees_with_pass():
    assert _check_times({"times": [1.0] * 50, "drains": [0.0] * 50}, 50, TS, 0.06, _fail) is None


def test_a_wall_clock_far_past_the_runs_is_timed_again_then_fails():
    problem = _check_times({"times": [0.001] * 50, "drains": []}, 50, TS, 2.0, _fail)
    assert problem is not None and problem["retry"] and problem["failed"][0] == "harness.timing-forged"


def test_more_time_reported_than_passed_fails_without_a_second_try():
    problem = _check_times({"times": [100.0] * 50, "drains": []}, 50, TS, 1.0, _fail)
    assert problem is not None and not problem.get("retry") and problem["failed"][0] == "harness.timing-forged"


def test_no_durations_fail_without_a_second_try():
    for times in ("fast", [float("nan")], [], [True], [-1.0]):
        problem = _check_times({"times": times}, 50, TS, 1.0, _fail)
        assert problem is not None and not problem.get("retry"), times
