"""The reference study's reported points (METHODS section 1, F2 and F3) as a fixture."""

import pytest

from stats import analyse, read_csv
from stats.config import AnalysisConfig


@pytest.fixture(scope="module")
def study(reference_csv):
    return analyse(read_csv(reference_csv), AnalysisConfig(n_boot=1000, progress=False))


def test_olmo_jump_between_adjacent_checkpoints_reads_as_sharp(study):
    c = study.curve("olmo_1b_0724", "bos").to_dict()
    assert c["shape"] == "sharp"
    assert c["max_jump_tokens"] == [117e9, 264e9]
    assert c["changepoint_tokens"] == [117e9, 264e9]
    assert c["max_jump"] == pytest.approx(0.703 - 0.074, abs=0.002)
    assert c["width_is_bound"] is True
    assert c["t50_ci"][0] <= 117e9 * 1.0001 and c["t50_ci"][1] >= 264e9 * 0.9999


@pytest.mark.parametrize("model", ["pythia_1b", "olmoe_1b_7b_0924"])
def test_pythia_and_olmoe_ramps_read_as_gradual(study, model):
    c = study.curve(model, "bos").to_dict()
    assert c["shape"] == "gradual"
    assert c["width_decades"] > c["spacing_decades"]


def test_induction_forms_first_and_the_separation_is_real(study):
    olmo_ind = study.curve("olmo_1b_0724", "induction").to_dict()
    assert olmo_ind["t50_ci"][0] <= 23e9 <= olmo_ind["t50_ci"][1]
    g = study.gap("olmo_1b_0724")
    assert g.p_value < 0.01
    assert g.ratio_ci[0] <= 264 / 23 <= g.ratio_ci[1]  # the paper's ~11.5x
    ge = study.gap("olmoe_1b_7b_0924")
    assert ge.bound == "lower"  # induction already formed at the first checkpoint (20B)
    assert ge.p_value < 0.01 and ge.ratio > 5
