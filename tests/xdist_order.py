"""The order in which ``pytest -n 2 --dist loadfile`` hands the test files to its workers: the
longest first (tests/conftest.py ``pytest_xdist_make_scheduler``).

pytest-xdist (3.8) hands out files in decreasing number of tests (``--loadscope-reorder``, its
default). Here that put the one- and two-test end-to-end files last: test_tutorial.py (2 tests,
41 s), test_tutorial_montecarlo.py, test_tutorial_robots.py and test_wheel.py (1 test, 10-15 s
each). Whichever worker drew them ran alone at the end of the session. Longest first is the usual
cure (LPT): the short files then fill the gaps at the end.

:data:`FILE_SECONDS` is each file's expected time on the idle 2-core machine: the sum of its
tests in the suite's ``--durations=80`` listing (at session 7's start, 7 min 34 s), plus
:data:`OTHER_TEST_S` for each of its tests not listed. A file not in the table is estimated as
:data:`OTHER_TEST_S` per test. The figures only order the files; a stale one costs some balance,
never a test.
"""
from __future__ import annotations

from collections import OrderedDict
from pathlib import PurePosixPath

#: the mean time of a test not in the durations listing (the rest of the 905 s of the two workers)
OTHER_TEST_S = 0.3

FILE_SECONDS = {
    "test_twin_vs_real.py": 73, "test_identify_robots.py": 58, "test_config_schema.py": 50,
    "test_own_robot_e2e.py": 44, "test_design.py": 43, "test_tutorial.py": 41, "test_montecarlo.py": 38,
    "test_real_fri.py": 38, "test_robustness.py": 33, "test_sweeps.py": 31, "test_real_rsi.py": 27,
    "test_html_report.py": 24, "test_pybullet_backend.py": 24, "test_control.py": 18,
    "test_fault_injection.py": 18, "test_files.py": 15, "test_tutorial_montecarlo.py": 15,
    "test_design_cli.py": 12, "test_identified_twin.py": 12, "test_identify_e2e.py": 12,
    "test_closed_loop_sim.py": 10, "test_report_layout.py": 10, "test_tutorial_robots.py": 10,
    "test_wheel.py": 10, "test_collision.py": 8, "test_estimators.py": 7, "test_batch_twin.py": 6,
    "test_cli_help.py": 6, "test_didim.py": 5, "test_fast_first_result.py": 5, "test_process_identify.py": 5,
    "test_progress_log.py": 4, "test_report_browser.py": 4, "test_truth_isolation.py": 4,
}


def expected_s(path: str, n_tests: int) -> float:
    """Expected seconds of the test file ``path`` (a node id's file part) with ``n_tests`` tests."""
    return float(FILE_SECONDS.get(PurePosixPath(path).name, OTHER_TEST_S * n_tests))


def longest_first(workqueue: "OrderedDict[str, dict]") -> "OrderedDict[str, dict]":
    """The files of xdist's work queue (file -> {node id: done}) sorted by :func:`expected_s`,
    longest first (ties keep xdist's order)."""
    return OrderedDict(sorted(workqueue.items(), key=lambda kv: -expected_s(kv[0], len(kv[1]))))


def make_scheduler(config, log):
    """xdist's LoadFileScheduling with its work queue in :func:`longest_first` order."""
    from xdist.scheduler import LoadFileScheduling

    class LongestFirstScheduling(LoadFileScheduling):
        _ordered = False

        def _assign_work_unit(self, node) -> None:
            if not self._ordered:  # the queue is complete before the first unit is handed out
                self.workqueue = longest_first(self.workqueue)
                self._ordered = True
                self.log("files, longest first:", list(self.workqueue))
            super()._assign_work_unit(node)

    return LongestFirstScheduling(config, log)
