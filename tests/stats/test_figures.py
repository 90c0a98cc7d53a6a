"""Figures a paper can use (issue 24): every figure a PNG (PDF and SVG on request), token axes written as
token counts, fractions never below zero, text of at least 8 points, legends clear of the data,
the per-head views, the models on one axis, and the reproduction table in LaTeX."""

import json
import re

import numpy as np
import pandas as pd
import pytest

import stats.figures
import stats.headviews
from stats import analyse, read_heads_csv
from stats.config import AnalysisConfig, SensitivityConfig
from stats.plotstyle import FORMATS, MIN_FONT, format_tokens
from stats.report import latex_escape, reproduction_latex, write_outputs
from stats.simulate import logspaced_tokens

TOK = logspaced_tokens(2e9, 3e12, 8)


def per_head_table(path):
    """Two models x 8 revisions x 32 heads: BOS heads switch on one by one, three induction heads early."""
    rng = np.random.default_rng(0)
    rows = []
    for model, shift in (("alpha", 0), ("beta", 2)):
        for j, t in enumerate(TOK):
            for h in range(32):
                on_bos = h >= 8 and j >= 2 + shift + (h % 4)
                on_ind = h < 3 and j >= 1 + shift
                rows.append({"model": model, "revision": f"step{j}", "tokens": t, "layer": h // 4, "head": h % 4,
                             "bos": 60.0 if on_bos else rng.uniform(0.5, 3), "induction": 80.0 if on_ind else rng.uniform(0.5, 3),
                             "pr": 30.0 if on_ind else rng.uniform(5, 10)})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """Every figure of a small analysis, and each matplotlib figure as it was saved."""
    path = per_head_table(tmp_path_factory.mktemp("h") / "heads.csv")
    analysis = analyse(read_heads_csv(path), AnalysisConfig(n_boot=40, progress=False,
                                                            sensitivity=SensitivityConfig(enabled=False)))
    figs = {}
    saves = {mod: mod.save for mod in (stats.figures, stats.headviews)}

    def capture(original):
        def save(fig, path, *a, **k):
            figs[path.name] = fig
            return original(fig, path, *a, **k)
        return save

    mp = pytest.MonkeyPatch()
    for mod, original in saves.items():
        mp.setattr(mod, "save", capture(original))
    out = tmp_path_factory.mktemp("out")
    try:
        written = write_outputs(analysis, out)
    finally:
        mp.undo()
    return out, written, figs


def test_every_figure_is_a_png_by_default(drawn):
    out, written, figs = drawn
    pngs = [p for kind, paths in written["figures"].items() if kind != "skipped" for p in paths]
    assert not written["figures"]["skipped"], written["figures"]["skipped"]
    assert {"models", "heads", "circuit", "curves", "timeline", "layers"} <= {k for k, v in written["figures"].items() if v}
    assert FORMATS == ("png",)
    for png in pngs:
        assert (out / png).suffix == ".png" and (out / png).stat().st_size > 1000, png
        assert not (out / png).with_suffix(".pdf").exists() and not (out / png).with_suffix(".svg").exists()


def test_pdf_and_svg_on_request(tmp_path):
    """``figures.formats=[png,pdf,svg]`` (stats.api.figure_formats): the vector files beside each PNG."""
    import matplotlib.pyplot as plt

    from stats.api import figure_formats
    from stats.config import FiguresConfig, StatsConfig
    from stats.plotstyle import save

    conf = StatsConfig(figures=FiguresConfig(formats=["svg", "pdf"]), output_dir=str(tmp_path))
    with figure_formats(conf):
        fig, ax = plt.subplots()
        ax.plot([1, 2], [0, 1])
        png = save(fig, tmp_path / "f.png")
    assert png.suffix == ".png" and png.is_file()
    assert (tmp_path / "f.pdf").read_bytes().startswith(b"%PDF")
    assert (tmp_path / "f.svg").read_text().lstrip().startswith("<?xml")


def _texts(fig):
    for ax in fig.axes:
        yield from [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.get_xticklabels(), *ax.get_yticklabels(), *ax.texts]
        if ax.get_legend() is not None:
            yield from ax.get_legend().get_texts()
    yield from fig.texts


def test_text_is_at_least_8_points_and_tokens_read_as_tokens(drawn):
    _, _, figs = drawn
    for name, fig in figs.items():
        small = [(t.get_text(), t.get_fontsize()) for t in _texts(fig) if t.get_text() and t.get_fontsize() < MIN_FONT - 1e-9]
        assert not small, (name, small)
        for ax in fig.axes:
            if ax.get_xscale() == "log" and "tokens" in ax.get_xlabel():
                fig.canvas.draw()
                labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
                assert labels and not any("e+" in s or "10^" in s or "$" in s for s in labels), (name, labels)
                assert any(re.fullmatch(r"[\d.]+[KMBT]", s) for s in labels), (name, labels)


def test_fraction_axes_start_at_zero_and_legends_sit_outside(drawn):
    _, _, figs = drawn
    curves = [n for n in figs if n.startswith("curve_")]
    assert curves
    for name in curves + [n for n in figs if n.startswith("models_")]:
        ax = figs[name].axes[0]
        top = 32 * 1.1 if ax.get_ylabel().endswith("heads (of 32)") else 1.02  # counts of the 32 heads followed
        assert ax.get_ylim()[0] == 0.0 and ax.get_ylim()[1] <= top, (name, ax.get_ylim())
    for name in curves:
        fig = figs[name]
        fig.canvas.draw()
        ax = fig.axes[0]
        legend = ax.get_legend().get_window_extent()
        assert legend.x0 >= ax.get_window_extent().x1 - 1, name  # right of the data, not over it


def test_per_head_views(drawn):
    _, written, figs = drawn
    assert {"heads_alpha_bos.png", "heads_alpha_induction.png", "circuit_alpha.png"} <= set(figs)
    ax = figs["heads_alpha_induction.png"].axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["L0H0", "L0H1", "L0H2"]  # the three that cross
    assert [t.get_text() for t in ax.get_xticklabels()][:2] == [format_tokens(TOK[0]), format_tokens(TOK[1])]
    circuit = figs["circuit_alpha.png"]
    assert sum(1 for a in circuit.axes if a.get_visible() and a.get_title().startswith("L")) == 3


def test_reproduction_table_in_latex():
    assert latex_escape("67% at step5000_tokens10B (>= 30x) & a -> b") == \
        r"67\% at step5000\_tokens10B ($\geq$ 30x) \& a $\rightarrow$ b"
    rep = {"study": "Xu (2026)", "rows": [
        {"finding": "F1", "model": "olmo_1b_0724", "quantity": "BOS heads in L0/L1", "reported": "0", "tool": "0 of 320",
         "agrees": True, "note": "-"},
        {"finding": "F4", "model": "pythia_1b", "quantity": "recall (>= 50x)", "reported": "67%", "tool": "67%",
         "agrees": False, "note": "at >= 50x"}]}
    tex = reproduction_latex(rep)
    assert tex.count(r"\\") == 3 and r"\begin{tabular}" in tex and r"\bottomrule" in tex
    assert r"olmo\_1b\_0724" in tex and r"\textbf{no}" in tex


@pytest.mark.parametrize("lo, hi, labels", [
    (4e5, 4e6, ["500K", "1M", "2M"]),      # a toy's one decade: 2x and 5x ticks too
    (1e9, 3e12, ["10B", "100B", "1T"]),    # the study's range: powers of ten only
])
def test_token_axes_label_enough_ticks(lo, hi, labels):
    import matplotlib.pyplot as plt

    from stats.plotstyle import token_axis

    fig, ax = plt.subplots()
    ax.plot([lo, hi], [0, 1])
    token_axis(ax)
    fig.canvas.draw()
    shown = [t.get_text() for t, v in zip(ax.get_xticklabels(), ax.get_xticks()) if lo <= v <= hi]
    plt.close(fig)
    assert all(label in shown for label in labels)
    assert (hi / lo < 100) == any(s.startswith(("2", "5")) for s in shown)


def test_curves_of_followed_heads_are_counts_titled_with_the_verdict(drawn):
    """Per-head data follow the same heads: the points are counts of heads (no binomial bars), the
    title is the verdict the report prints (``CurveAnalysis.verdict_text``) and its reason, and the
    legend marks the lowest AICc among the fits."""
    out, written, figs = drawn
    summary = json.loads((out / "summary.json").read_text())
    for name, head_class, n_heads in (("curve_alpha_induction.png", "induction", 3), ("curve_alpha_bos.png", "bos", 24)):
        ax = figs[name].axes[0]
        assert ax.get_ylabel() == f"{head_class} heads (of 32)"
        assert not any(c.get_label().startswith("observed") for c in ax.containers)  # no binomial bars
        heads = next(line for line in ax.get_lines() if line.get_label() == "heads flagged")
        assert max(heads.get_ydata()) == n_heads
        record = next(c for c in summary["curves"] if c["model"] == "alpha" and c["class"] == head_class)
        title = ax.get_title(loc="left")
        assert title.startswith(f"alpha / {head_class}: {record['shape']}")
        assert record["reason"][:40] in title.replace("\n", " ")
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert sum("lowest" in label for label in labels) == (1 if record["fits"] else 0), labels


def test_a_class_with_no_heads_gets_no_curve_figure():
    from types import SimpleNamespace

    from stats.figures import has_heads

    class Counts(SimpleNamespace):
        def __len__(self):
            return len(self.k)

    assert not has_heads(SimpleNamespace(curve=Counts(k=np.zeros(4))))
    assert not has_heads(SimpleNamespace(curve=Counts(k=np.zeros(0))))
    assert has_heads(SimpleNamespace(curve=Counts(k=np.array([0, 0, 1, 2]))))


@pytest.mark.parametrize("lo, hi", [(3.2e6, 4.1e6), (2.9e6, 4.2e6), (1.1e6, 9e6)])
def test_narrow_token_axes_never_fall_back_to_crowded_linear_ticks(lo, hi):
    """The toy's continuous panels on 3M-4M read '3M 3.5M 4M' or so, never '3.25M3.5M3.75M4M'."""
    import matplotlib.pyplot as plt

    from stats.plotstyle import token_axis

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([lo, hi], [0, 1])
    token_axis(ax)
    fig.canvas.draw()
    inside = [(v, t.get_text()) for t, v in zip(ax.get_xticklabels(), ax.get_xticks()) if lo <= v <= hi]
    boxes = [t.get_window_extent() for t, v in zip(ax.get_xticklabels(), ax.get_xticks()) if lo <= v <= hi]
    plt.close(fig)
    assert 2 <= len(inside) <= 7, inside
    assert all(re.fullmatch(r"[\d.]+[KMBT]", text) for _, text in inside), inside
    assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:])), inside  # no two labels touch
