"""The speed work of issue 33 (point 7) gives the plain computation's results: the batched
Levenberg-Marquardt (compact running problems, Cholesky solves over the batch) against each
problem fitted alone, the step test's growing chunks against fixed ones, and the analysis on
worker processes against the serial one (benchmarks/bench_stats_speed.py times them)."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from stats import analyse
from stats.bootstrap import parametric_bootstrap
from stats.config import AnalysisConfig, SensitivityConfig
from stats.hypotheses import sequential_p, step_vs_logistic
from stats.models import LogisticModel
from stats.models.base import CHOLESKY_FROM, _cholesky_solve, _solve_damped
from stats.parallel import MIN_PARALLEL_TASKS, workers
from stats.sources.heads_csv import read_heads_csv
from stats.times import transition_times

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_stats_speed.py"


def test_the_cholesky_solve_over_the_batch_is_lapacks_and_a_bad_system_falls_back():
    rng = np.random.default_rng(0)
    M = rng.normal(size=(CHOLESKY_FROM + 50, 4, 6))
    A = M @ M.transpose(0, 2, 1) + 1e-3 * np.eye(4)
    b = rng.normal(size=(len(A), 4))
    exact = np.linalg.solve(A, b[..., None])[..., 0]
    assert np.allclose(_cholesky_solve(A, b), exact, rtol=1e-9, atol=1e-9)
    A[7] = np.diag([1.0, -2.0, 3.0, 4.0])  # not positive definite: NaN from Cholesky, LAPACK's solution instead
    x = _solve_damped(A, b)
    assert np.allclose(x[7], b[7] / np.array([1.0, -2.0, 3.0, 4.0])) and np.allclose(x[8:], exact[8:], atol=1e-9)


def test_the_batched_bootstrap_refits_each_replicate_as_a_fit_of_its_own():
    """1000 replicates refitted at once (compact running set, Cholesky solves) against a loop of
    one-replicate fits (the plain path: LAPACK on a handful of systems): the same maxima, and
    the same transition-time intervals."""
    tokens = np.logspace(9, 12, 8)
    x = np.log10(tokens)
    n = np.full(8, 200.0)
    k = np.round(n * (0.05 + 0.6 / (1 + np.exp(-3.0 * (x - 10.6)))))
    fit = LogisticModel().fit(tokens, k, n)
    boot = parametric_bootstrap(fit, 1000, np.random.default_rng(1))
    model = LogisticModel()
    alone = [model.fit_batch(x, boot.counts[i:i + 1], n, init=fit.theta) for i in range(len(boot.counts))]
    ll = np.array([a.loglik[0] for a in alone])
    theta = np.concatenate([a.theta for a in alone])
    assert np.max(np.abs(boot.loglik - ll)) < 1e-6
    assert np.quantile(np.abs(boot.theta[:, 2] - theta[:, 2]), 0.99) < 1e-4
    batched = transition_times(fit, boot, np.random.default_rng(2))
    looped = transition_times(fit, type(boot)(theta, ll, boot.counts), np.random.default_rng(2))
    for key in ("t50_ci", "onset_ci", "saturation_ci"):
        assert np.allclose(getattr(batched, key), getattr(looped, key), rtol=1e-3), key


def test_growing_chunks_give_the_p_value_of_fixed_chunks():
    stream = np.random.default_rng(3).standard_normal(1000)

    def replicates_of(drawn):
        def replicates(size):
            out = stream[drawn[0]:drawn[0] + size]
            drawn[0] += size
            return out
        return replicates

    for t in (0.5, 1.5, 2.2, 2.6, 3.5):
        fixed = sequential_p(replicates_of([0]), t, 1000)
        grown = sequential_p(replicates_of([0]), t, 1000, growth=2.0)
        assert grown[0] == fixed[0] and grown[1] >= fixed[1]


def test_the_step_test_with_growing_chunks_is_the_fixed_chunks_test(monkeypatch):
    """Binomial replicates (dispersion 1) are drawn as one stream, whatever the chunks: the same p."""
    import stats.hypotheses as hyp

    tokens = np.logspace(9, 12, 10)
    x = np.log10(tokens)
    n = np.full(10, 150.0)
    k = np.round(n * (0.1 + 0.5 / (1 + np.exp(-1.5 * (x - 10.5)))))
    grown = step_vs_logistic(tokens, k, n, 600, np.random.default_rng(4))
    monkeypatch.setattr(hyp, "STEP_TEST_GROWTH", 1.0)
    fixed = step_vs_logistic(tokens, k, n, 600, np.random.default_rng(4))
    assert grown.p_value == fixed.p_value and grown.statistic == fixed.statistic


def test_workers_are_started_only_for_a_study_worth_them():
    assert workers(0, MIN_PARALLEL_TASKS - 1) == 1 and workers(1, 500) == 1
    assert workers(3, 2) == 2 and workers(2, 40) == 2


@pytest.fixture(scope="module")
def heads_csv(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("bench_stats_speed", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    path = tmp_path_factory.mktemp("speed") / "heads.csv"
    bench.per_head_table(2, 8, np.random.default_rng(5)).to_csv(path, index=False)
    return path


def test_the_analysis_on_two_processes_is_the_serial_analysis(heads_csv):
    """Every curve and every re-counted curve of the sensitivity table has its own stream: the
    summary on two worker processes is the serial one, entry for entry."""
    results = read_heads_csv(heads_csv)
    summaries = []
    for n_jobs in (1, 2):
        cfg = AnalysisConfig(n_boot=60, progress=False, seed=7, n_jobs=n_jobs,
                             sensitivity=SensitivityConfig(n_boot=30))
        summaries.append(json.dumps(analyse(results, cfg).to_dict(), sort_keys=True, default=str))
    assert summaries[0] == summaries[1]
    assert len(json.loads(summaries[0])["sensitivity"]["rows"]) > 0
