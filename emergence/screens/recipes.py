"""Screen recipes: which reducers run in the pass and how a group is ablated.

``screen.recipe`` names one entry of :data:`emergence.config.SCREEN_RECIPES`:

- ``project`` (default): METHODS sections 5-7 (every second-half query, baseline of
  every visible non-target key, covariance PR, ablation against controls from all heads);
- ``xu2026``: the reference study's own recipe (:mod:`emergence.screens.xu2026`: last
  query, 50 fixed random baseline keys, exp-entropy PR; ablation with per-layer matched
  controls and whole-layer upper bounds, :mod:`emergence.screens.xu2026_ablation`).

A recipe checks the corpus it needs before any model is loaded (:meth:`ScreenRecipe.check`;
each field's own bounds are the schema's, emergence/config.py), builds the reducers of
the one streaming pass, and runs the group ablation, returning its metrics. The names
are ``screen.recipe``'s choices.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from emergence import EmergenceError
from emergence.config import SCREEN_RECIPES
from emergence.common.contract import selectivity_column
from emergence.screens.ablation import group_ablation, parse_heads
from emergence.screens.base import Reducer, rows_for
from emergence.screens.continuous import InductionLossReducer
from emergence.screens.head_ablation import HeadMeanReducer
from emergence.screens.participation import ParticipationRatioReducer
from emergence.screens.selectivity import SelectivityReducer
from emergence.screens.xu2026 import (BASELINE_EXCLUDED, ExpEntropyPRReducer, LastPositionLossReducer,
                                      Xu2026SelectivityReducer)
from emergence.screens.xu2026_ablation import matched_ablation


def flagged(heads, thresholds, head_class: str) -> List[tuple]:
    """(layer, head) of every head whose ``head_class`` selectivity reaches its threshold."""
    return [tuple(int(i) for i in ix)
            for ix in np.argwhere(heads[selectivity_column(head_class)] >= thresholds[head_class])]


class ScreenRecipe:
    """One way of screening heads. Subclasses set the PR definition and the corpora they need."""

    name = ""
    #: Logged as the run's ``screen.pr_definition`` param.
    pr_definition = ""
    #: Corpus kinds the recipe can read; None: any.
    corpora: Optional[Sequence[str]] = None
    #: The reducer of the clean metrics the ablation compares with, and the ablation function.
    loss_reducer: type
    ablation: Callable

    def check(self, screen_cfg, corpus_cfg) -> None:
        """The corpus the recipe needs, before any model is loaded."""
        if self.corpora is not None and corpus_cfg.kind not in self.corpora:
            raise EmergenceError(f"screen.recipe={self.name} needs corpus={' or '.join(self.corpora)} (its pair "
                                 f"positions); got corpus kind {corpus_cfg.kind!r}")

    def reducers(self, screen_cfg) -> List[Reducer]:
        """The reducers of the screen's one pass (the ablation's clean metrics and, for mean
        ablation, its head means are measured there too: :func:`ablation_reducers`)."""
        raise NotImplementedError

    def ablate(self, model, adapter, probe, heads, thresholds, cfg, progress: bool,
               screened: Sequence[Reducer] = ()) -> Dict[str, float]:
        """The group ablation's metrics (:attr:`ablation` over the first ``cfg.n_sequences``);
        ``screened``: the finished reducers of the screen's pass (its clean metrics, and the head means
        when it measured them over the ablation's sequences)."""
        subset = probe.head(cfg.n_sequences, f" (first {cfg.n_sequences} for ablation)")
        loss = found(screened, self.loss_reducer)
        mean_reducer = found(screened, HeadMeanReducer)
        same_means = mean_reducer is not None and cfg.mode == "mean" and mean_reducer.limit == cfg.n_sequences
        group = flagged(heads, thresholds, "induction") if cfg.group == "induction" else parse_heads(cfg.heads)
        exclude = sorted({h for c in cfg.control_exclude for h in flagged(heads, thresholds, c)})
        result = self.ablation(model, adapter, subset, group, cfg.mode, cfg.controls, cfg.seed,
                                exclude=exclude, progress=progress,
                                clean=loss.first(subset.n_sequences) if loss else None,
                                means=mean_reducer.means if same_means else None)
        return result.metrics()

    def attention_rows(self, screen_cfg, seq_len: int) -> Optional[int]:
        """How many attention rows a sequence's pass computes (None: the full map, every query;
        emergence/loading.py sizes the batch with it)."""
        rows = rows_for(self.reducers(screen_cfg), seq_len)
        return None if rows is None else len(rows)

    def params(self, screen_cfg) -> Dict[str, str]:
        return {"screen.pr_definition": self.pr_definition if screen_cfg.participation_ratio else "none"}


class ProjectRecipe(ScreenRecipe):
    name = "project"
    pr_definition = "covariance_trace_ratio"
    loss_reducer = InductionLossReducer
    ablation = staticmethod(group_ablation)

    def reducers(self, screen_cfg) -> List[Reducer]:
        reducers: List[Reducer] = [SelectivityReducer(screen_cfg.local_window), InductionLossReducer()]
        if screen_cfg.participation_ratio:
            reducers.append(ParticipationRatioReducer(screen_cfg.pr.samples, screen_cfg.pr.seed))
        return reducers + ablation_reducers(screen_cfg)


class Xu2026Recipe(ScreenRecipe):
    name = "xu2026"
    pr_definition = "exp_entropy_last_position"
    corpora = ("xu2026",)
    loss_reducer = LastPositionLossReducer
    ablation = staticmethod(matched_ablation)

    def check(self, screen_cfg, corpus_cfg) -> None:
        super().check(screen_cfg, corpus_cfg)
        x = screen_cfg.xu2026
        if corpus_cfg.seq_len - BASELINE_EXCLUDED < x.baseline_positions:
            raise EmergenceError(f"corpus.seq_len={corpus_cfg.seq_len} is too short for screen.recipe=xu2026: its "
                                 f"{x.baseline_positions} baseline keys lie in 1..seq_len-{BASELINE_EXCLUDED}, so "
                                 f"seq_len must be >= {x.baseline_positions + BASELINE_EXCLUDED}")

    def reducers(self, screen_cfg) -> List[Reducer]:
        x = screen_cfg.xu2026
        out: List[Reducer] = [Xu2026SelectivityReducer(x.baseline_positions, x.baseline_seed, x.floor,
                                                       {"local_window": screen_cfg.local_window}),
                              LastPositionLossReducer()]
        if screen_cfg.participation_ratio:
            out.append(ExpEntropyPRReducer(x.pr_sequences))
        return out + ablation_reducers(screen_cfg)


def ablation_reducers(screen_cfg) -> List[Reducer]:
    """What the screen's pass adds for a mean ablation: the head means over the ablation's
    sequences (so no separate pass computes them)."""
    cfg = screen_cfg.ablation
    return [HeadMeanReducer(limit=int(cfg.n_sequences))] if cfg is not None and cfg.mode == "mean" else []


def found(reducers: Sequence[Reducer], kind: type) -> Optional[Reducer]:
    """The first of ``reducers`` that is a ``kind``, else None."""
    return next((r for r in reducers if isinstance(r, kind)), None)


#: The recipes, entries of emergence/config.py ``SCREEN_RECIPES``.
PROJECT, XU2026 = ProjectRecipe(), Xu2026Recipe()


def recipe_for(screen_cfg) -> ScreenRecipe:
    """The recipe ``screen.recipe`` names (default ``project``)."""
    return SCREEN_RECIPES.get(getattr(screen_cfg, "recipe", None) or "project")
