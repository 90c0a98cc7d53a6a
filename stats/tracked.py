"""The read stage's results: the tidy tables of tracked screen runs, and their curves.

A *curve* is k(t): the number ``k`` of ``n`` heads flagged for one head class at the
revisions of one model, with their training-token counts ``t`` (:class:`Curve`).

Tables of a :class:`TrackedResults` (pandas DataFrames):

- ``curves``: model, pretraining_corpus, class, revision, tokens, k, n - one row per
  (model, class, revision), ``n`` all heads of the model;
- ``layers``: model, class, revision, tokens, layer, k, n - per-layer counts
  (``n`` = heads per layer);
- ``heads``: model, revision, tokens, layer, head, ``selectivity.<class>``,
  ``flag.<class>``, primary, first_token_attention and (when the PR screen ran)
  pr, pr_corrected, pr_samples - one row per head and revision, or None (the runs'
  ``heads.csv``, or a per-head file, :mod:`stats.sources.heads_csv`; flags and counts are
  re-derived at the analysis thresholds by :func:`stats.heads.apply_thresholds`);
- ``continuous``: model, revision, tokens, metric, value - the continuous metrics
  (mean selectivity, mean first-token attention, induction loss and accuracy, PR).

The sources (:mod:`stats.sources`) fill them; the rules every source shares live here:
revisions with equal token counts are refused (:func:`dedupe_tokens`); a model trained
with several seeds (a seed suite) gets one set of curves per training run, named
``<model> [seed 3]`` (:func:`seed_label`, :func:`label_seeds`), recorded in
:attr:`TrackedResults.seeds` for the pooling (:mod:`stats.pooling`); revisions with zero
tokens (``step0``), no heads or a missing count are kept in the tables but left out of
the curves fitted on log10 tokens (noted by the analysis).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional

import numpy as np
import pandas as pd

from emergence.common.contract import SEED_KINDS, RunSeed, flag_column, selectivity_column
from emergence.common import head_classes
from stats.errors import StatsError
from stats.results import Results

CURVE_COLUMNS = ["model", "pretraining_corpus", "class", "revision", "tokens", "k", "n"]
LAYER_COLUMNS = ["model", "class", "revision", "tokens", "layer", "k", "n"]
CONTINUOUS_COLUMNS = ["model", "revision", "tokens", "metric", "value"]


@dataclass
class Curve(Results):
    """One curve: arrays sorted by tokens (positive tokens only).

    ``identity``: whether the counts follow the *same* heads across revisions (a
    per-head table: ``heads.csv`` of the runs, or a ``heads_csv`` file), so that they
    are cumulative up to flicker; False for aggregate counts (``source=csv``), which
    the analysis treats as independent draws (:mod:`stats.shape`, the two regimes).
    """

    RENAME = {"head_class": "class", "corpus": "pretraining_corpus"}
    EXCLUDE = ("flags", "flags_at_init")

    model: str
    head_class: str
    revisions: np.ndarray
    tokens: np.ndarray
    k: np.ndarray
    n: np.ndarray
    corpus: str = "unknown"
    dropped: list = field(default_factory=list)
    identity: bool = False
    #: with identity known: the heads' flags, (revisions x heads) booleans in the order of ``revisions``
    flags: Optional[np.ndarray] = None
    #: with identity known and a revision at 0 tokens (step 0, left out of the fits): the same heads'
    #: flags there, before any training (a head flagged then is background, not a circuit that formed)
    flags_at_init: Optional[np.ndarray] = None

    @property
    def background(self) -> np.ndarray:
        """Which followed heads are background: flagged at a revision at 0 tokens (step 0), before any
        training, where the curve has one (none otherwise: without step 0, heads flagged from the
        first revision may have formed before it or be on by construction, and are counted)."""
        init = self.flags_at_init
        if init is None or self.flags is None or np.shape(init) != np.shape(self.flags)[1:]:
            return np.zeros(0 if self.flags is None else np.shape(self.flags)[1], bool)
        return np.asarray(init, bool)

    @property
    def trained_flags(self) -> Optional[np.ndarray]:
        """The flags of the followed heads that are not :attr:`background` (None without flags)."""
        return None if self.flags is None else np.asarray(self.flags, bool)[:, ~self.background]

    @property
    def x(self) -> np.ndarray:
        return np.log10(self.tokens)

    @property
    def fraction(self) -> np.ndarray:
        return self.k / np.where(self.n > 0, self.n, 1)

    @property
    def regime(self) -> str:
        """The verdict rule's regime its counts call for (:mod:`stats.shape`): ``identity`` where they
        follow the same heads, else ``aggregate``."""
        return "identity" if self.identity else "aggregate"

    def __len__(self):
        return len(self.tokens)

    def summary(self) -> str:
        if not len(self):
            return f"{self.model} / {self.head_class}: no revisions with positive tokens"
        return (f"{self.model} / {self.head_class}: {len(self)} revisions, {self.tokens[0]:.3g} to {self.tokens[-1]:.3g} "
                f"tokens, {self.k[0]:g} -> {self.k[-1]:g} of {self.n[-1]:g} heads"
                + (" (the same heads followed)" if self.identity else " (aggregate counts)"))

    def head(self, stop: int) -> "Curve":
        """The curve's first ``stop`` revisions (the rise of a curve that falls again)."""
        return self.at(slice(0, stop))

    def at(self, index) -> "Curve":
        """The curve at the revisions ``index`` (a slice or indices in order), the same heads."""
        return Curve(self.model, self.head_class, self.revisions[index], self.tokens[index], self.k[index], self.n[index],
                     self.corpus, list(self.dropped), self.identity, None if self.flags is None else self.flags[index],
                     self.flags_at_init)

    @classmethod
    def from_frame(cls, df: pd.DataFrame, model: str, head_class: str, corpus: str = "unknown",
                   identity: bool = False) -> "Curve":
        df = df.sort_values("tokens")
        dropped = []
        bad = (df["tokens"] <= 0) | (df["n"] <= 0) | df["k"].isna() | df["n"].isna() | df["tokens"].isna()
        if bad.any():
            dropped = [f"{r.revision} (tokens={r.tokens}, n={r.n})" for r in df[bad].itertuples()]
            df = df[~bad]
        return cls(model=model, head_class=head_class, revisions=df["revision"].astype(str).to_numpy(),
                   tokens=df["tokens"].to_numpy(float), k=df["k"].to_numpy(float), n=df["n"].to_numpy(float),
                   corpus=corpus, dropped=dropped, identity=identity)


@dataclass
class TrackedResults(Results):
    """The tidy tables read from a store or a CSV (see module docstring)."""

    EXCLUDE = ("curves", "layers", "heads", "continuous", "known_index", "seeds", "counts_only")

    curves: pd.DataFrame
    layers: pd.DataFrame
    heads: Optional[pd.DataFrame] = None
    continuous: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CONTINUOUS_COLUMNS))
    source: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    #: (model, revision) -> the revision's index among its model's known revisions (the runs'
    #: ``registry_index`` param, its written name; empty for CSV input): which screened revisions are adjacent checkpoints.
    known_index: dict = field(default_factory=dict)
    #: model name in the tables -> its :class:`emergence.common.contract.RunSeed` (training run of a seed
    #: suite: seed, kind, group), for the models that are one run of a seed suite; the pooling of
    #: :mod:`stats.pooling` groups them by ``group``. Empty without seeds.
    seeds: dict = field(default_factory=dict)
    #: the source gives counts only (``source=csv``): no per-head data is expected, so its absence is no note
    counts_only: bool = False

    def seed_groups(self) -> dict:
        """group -> the model names of its runs (in table order), for groups with a seed."""
        out: dict = {}
        for model in self.models:
            if model in self.seeds:
                out.setdefault(self.seeds[model].group, []).append(model)
        return out

    def known_between(self, model: str, lo: str, hi: str) -> Optional[int]:
        """Registry revisions strictly between screened revisions ``lo`` and ``hi`` (0: adjacent
        checkpoints); None when the runs do not say."""
        a, b = self.known_index.get((model, lo)), self.known_index.get((model, hi))
        return None if a is None or b is None else abs(b - a) - 1

    @property
    def models(self) -> list:
        return sorted(self.curves["model"].unique())

    def classes(self, model: Optional[str] = None) -> list:
        df = self.curves if model is None else self.curves[self.curves["model"] == model]
        present = set(df["class"].unique())
        known = head_classes.names()
        return [c for c in known if c in present] + sorted(present - set(known))

    def corpus(self, model: str) -> str:
        vals = self.curves.loc[self.curves["model"] == model, "pretraining_corpus"].dropna().unique()
        return str(vals[0]) if len(vals) else "unknown"

    def curve(self, model: str, head_class: str) -> Curve:
        df = self.curves[(self.curves["model"] == model) & (self.curves["class"] == head_class)]
        if df.empty:
            raise StatsError(
                f"no curve for model {model!r} class {head_class!r}; models: {self.models}, classes: {self.classes(model)}"
            )
        # the counts follow the same heads where a per-head table has that model's flags of that class
        h = self.heads
        identity = bool(h is not None and flag_column(head_class) in h.columns and (h["model"] == model).any())
        curve = Curve.from_frame(df, model, head_class, self.corpus(model), identity)
        if identity:
            self.follow_heads(curve, df)
        return curve

    def follow_heads(self, curve: Curve, df: pd.DataFrame, threshold: Optional[float] = None) -> Curve:
        """Set ``curve``'s heads' flags (:meth:`head_flags`) and, where ``df`` (its counts) has a revision
        at 0 tokens, their flags there (``flags_at_init``)."""
        init = df.loc[df["tokens"] == 0, "revision"].astype(str).iloc[:1].tolist()
        flags = self.head_flags(curve.model, curve.head_class, [*curve.revisions, *init], threshold)
        curve.flags = flags[: len(curve.revisions)]
        curve.flags_at_init = flags[-1] if init else None
        return curve

    def head_flags(self, model: str, head_class: str, revisions, threshold: Optional[float] = None) -> np.ndarray:
        """(revisions x heads) flags of ``model``'s heads for ``head_class``, rows in the order of
        ``revisions``, columns the (layer, head) pairs; a head missing at a revision is unflagged.
        With ``threshold``: flagged at ``selectivity >= threshold`` instead of the table's flags."""
        h = self.model_heads(model)
        if threshold is None:
            flag = np.nan_to_num(h[flag_column(head_class)].to_numpy(float), nan=0.0) > 0
        else:
            flag = np.nan_to_num(h[selectivity_column(head_class)].to_numpy(float), nan=0.0) >= threshold
        layer, head = h["layer"].to_numpy(), h["head"].to_numpy()
        columns, _ = pd.factorize(pd.MultiIndex.from_arrays([layer, head]), sort=True)  # (layer, head) pairs, sorted
        rows = pd.Index([str(r) for r in revisions]).get_indexer(h["revision"].astype(str).to_numpy())
        grid = np.zeros((len(revisions), int(columns.max()) + 1 if len(columns) else 0), bool)
        keep = (rows >= 0) & flag
        grid[rows[keep], columns[keep]] = True  # a head flagged in any of its rows at a revision
        return grid

    def model_heads(self, model: str) -> pd.DataFrame:
        """The per-head rows of ``model`` (split once per table: the analysis asks for each model's
        heads once per class and threshold)."""
        cache = self.__dict__.get("_heads_by_model")
        if cache is None or cache[0] is not self.heads:
            groups = {m: g for m, g in self.heads.groupby("model", sort=False)} if self.heads is not None else {}
            cache = (self.heads, groups)
            self.__dict__["_heads_by_model"] = cache
        return cache[1].get(model, self.heads.iloc[:0])

    def iter_curves(self) -> Iterator[Curve]:
        for model in self.models:
            for head_class in self.classes(model):
                yield self.curve(model, head_class)

    def has_pr(self) -> bool:
        return self.heads is not None and "pr" in self.heads.columns and self.heads["pr"].notna().any()

    def summary(self) -> str:
        kind = self.source.get("kind", "?")
        per_head = "a per-head table" if self.heads is not None else "no per-head table"
        seeds = f", {len(self.seed_groups())} seed suite(s)" if self.seeds else ""
        return (f"{kind}: {len(self.models)} model(s), {len(self.curves)} count rows over "
                f"{self.curves['class'].nunique()} class(es), {per_head}{seeds}; {len(self.notes)} note(s)")


def dedupe_tokens(curves: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, class, tokens); ties in tokens are refused.

    Curves are fitted on log10 tokens, so two different revisions at the same token
    count cannot both be points, and picking one silently would hide data: a tie is an
    error naming both revisions. Rows repeated exactly (same revision and counts) are
    kept once; the same revision with different counts is an error too.
    """
    curves = curves.sort_values(["model", "class", "tokens", "revision"])
    curves = curves.drop_duplicates(["model", "class", "tokens", "revision", "k", "n"])
    clash = curves[curves.duplicated(["model", "class", "tokens"], keep=False)]
    if not clash.empty:
        first = clash.iloc[0]
        same = clash[(clash["model"] == first["model"]) & (clash["class"] == first["class"])
                     & (clash["tokens"] == first["tokens"])]
        revs = sorted(set(map(str, same["revision"])))
        if len(revs) > 1:
            raise StatsError(f"model {first['model']!r}: revisions {revs} have the same token count "
                             f"{first['tokens']:.6g}; a curve needs one revision per token count (drop one, "
                             "or give each its own tokens)")
        raise StatsError(f"model {first['model']!r} class {first['class']!r} revision {revs[0]!r}: conflicting "
                         f"counts {sorted(zip(same['k'], same['n']))} (k, n); keep one row per revision")
    return curves.reset_index(drop=True)


def seed_label(model: str, seed: Optional[RunSeed], n_seeds: int) -> str:
    """The table name of one training run of ``model``: ``model`` itself when the model has one
    run (``n_seeds`` < 2 or no seed), else ``<model> [seed 3]`` (``[data-seed 1]``, ``[weight-seed 2]``)."""
    return model if seed is None or n_seeds < 2 else f"{model} [{seed.label}]"


def label_seeds(df: pd.DataFrame, where: str) -> tuple:
    """A table with a ``model`` and an optional ``seed`` column (and ``seed_kind``, default
    ``both``) relabelled per training run (:func:`seed_label`); returns ``(table, seeds)`` with
    ``seeds`` as in :attr:`TrackedResults.seeds` (group: the model). An empty seed cell is a
    run of no seed suite. Refuses a ``seed_kind`` outside the valid kinds in one line."""
    if "seed" not in df.columns:
        return df, {}
    df = df.copy()
    kinds = df["seed_kind"] if "seed_kind" in df.columns else pd.Series("both", index=df.index)
    kinds = kinds.where(kinds.notna() & (kinds.astype(str) != ""), "both").astype(str)
    bad = ~kinds.isin(SEED_KINDS)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise StatsError(f"{where}: column 'seed_kind' row {row}: {kinds.iloc[row]!r} is not a seed kind; valid: "
                         f"{', '.join(SEED_KINDS)}")
    runs = [None if pd.isna(v) or str(v) == "" else RunSeed(_seed_text(v), k, str(m))
            for v, k, m in zip(df["seed"], kinds, df["model"])]
    per_model = {m: len({r for r, mm in zip(runs, df["model"]) if mm == m and r is not None}) for m in df["model"].unique()}
    df["model"] = [seed_label(model, run, per_model[model]) for run, model in zip(runs, df["model"])]
    seeds = {label: run for label, run in zip(df["model"], runs) if run is not None}
    return df.drop(columns=[c for c in ("seed", "seed_kind") if c in df.columns]), seeds


def _seed_text(value) -> str:
    """A seed cell as text: ``3`` for 3 or 3.0, else the text itself."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    return str(int(f)) if np.isfinite(f) and f == int(f) else str(value)
