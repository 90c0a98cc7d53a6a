"""The run contract between screening (``emergence``) and statistics (``stats``): the names of
what a screen run writes and ``stats`` reads, defined once.

- tags (a run is read when ``emergence.status = complete``) and params (plus the flattened
  config, ``corpus.*`` and ``screen.*``);
- metrics, built by :func:`count_metric` and the like and read back by :func:`parse_metric`;
- the ``heads.csv`` artifact: one row per head, :data:`HEAD_KEY_COLUMNS`, then
  ``selectivity.<class>`` and ``flag.<class>`` of every registered head class, and more;
- the run identity (:class:`RunIdentity`): a run measures one model at one revision on one
  probe with one screen. Every run logs all head classes (``screen.classes`` only chooses what
  is printed), so runs that share model, revision and probe are points of the same curves;
- the seed of a run of a seed suite (:class:`RunSeed`), part of the identity: runs of one
  model trained with other seeds are other curves, pooled by ``stats``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Mapping, Optional

# --- tags -----------------------------------------------------------------------------------

#: The run identity's hash (model config, revision, corpus, screen; emergence.tracking.config_hash).
CONFIG_HASH_TAG = "emergence.config_hash"
#: ``complete`` once params, metrics and artifacts are all written (the last write).
STATUS_TAG = "emergence.status"
STATUS_COMPLETE = "complete"
#: Shared by the runs of one sweep.
SWEEP_TAG = "emergence.sweep"
#: ``screen`` for a revision's run, ``sweep`` for a sweep's parent run.
KIND_TAG = "emergence.kind"
ERROR_TAG = "emergence.error"
HOST_TAG = "emergence.claim.host"
PID_TAG = "emergence.claim.pid"
HEARTBEAT_TAG = "emergence.heartbeat"
#: A screen run's claim on its identity (emergence/tracking.py): ``pending`` from its creation on a
#: tracking server until it has seen no rival, then ``won``; a claim without the tag is ``won``.
CLAIM_STATE_TAG = "emergence.claim.state"
CLAIM_PENDING = "pending"
CLAIM_WON = "won"
#: Readable copies of the identity, for the MLflow UI.
MODEL_TAG = "emergence.model"
REVISION_TAG = "emergence.revision"
TOKENS_TAG = "emergence.tokens"
SCREEN_TAG = "emergence.screen"
PARENT_TAG = "mlflow.parentRunId"
RUN_NAME_TAG = "mlflow.runName"
NOTE_TAG = "mlflow.note.content"
#: Experiment tag of every experiment the tool writes (the screens', the statistics'): a model-development
#: experiment, not a GenAI one (what the MLflow UI does with it: emergence/common/mlflow_ui.py).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
#: The tags of a statistics run (``python -m stats``; its :data:`KIND_TAG` is ``stats``): what it
#: analysed.
STATS_KIND_TAG = "stats.kind"
STATS_MODELS_TAG = "stats.models"
STATS_CLASSES_TAG = "stats.classes"
STATS_SOURCE_TAG = "stats.source"

# --- params ---------------------------------------------------------------------------------

MODEL_PARAM = "model"
REVISION_PARAM = "revision"
STEP_PARAM = "step"
#: Training tokens seen at the revision (an integer, as text): the curves' x axis.
TOKENS_PARAM = "tokens"
FAMILY_PARAM = "family"
PRETRAINING_CORPUS_PARAM = "pretraining_corpus"
N_LAYERS_PARAM = "n_layers"
N_HEADS_PARAM = "n_heads"
HEAD_DIM_PARAM = "head_dim"
#: The revision's position among its model's known revisions (0 = fewest tokens) and their number (the
#: written names ``registry_index`` / ``registry_size`` are kept from before the rename, so old stores read the same):
#: two screened revisions are adjacent checkpoints when their indices differ by 1.
KNOWN_INDEX_PARAM = "registry_index"
KNOWN_SIZE_PARAM = "registry_size"
#: Seed suites (many training runs of one model, :class:`RunSeed`): the run's seed, what it varies
#: (one of :data:`SEED_KINDS`) and the group of runs it belongs to (pooled by ``stats``).
SEED_PARAM = "seed"
SEED_KIND_PARAM = "seed_kind"
SEED_GROUP_PARAM = "seed_group"
#: ``data``: only the data order differs from the group's reference run; ``weight``: only the
#: initialisation; ``both``: an independent training run (PolyPythias' ``seed<N>`` repos).
SEED_KINDS = ("data", "weight", "both")
#: The toy recipe's seed params in a run's flattened config (runs from before :data:`SEED_PARAM`).
RECIPE_SEED_PARAMS = ("model.recipe.seed", "model.recipe.data_seed", "model.recipe.init_seed")
#: Config keys added after runs were made: left out of a run's identity hash while null, so that
#: adding them changes the identity of no existing run (emergence.tracking.config_hash).
NULL_FREE_IDENTITY_KEYS = ("model.size", "model.seed", "model.seed_kind", "model.recipe.data_seed",
                           "model.recipe.init_seed")
#: The probe in words (``synthetic_induction N=2000 ...``).
PROBE_PARAM = "probe"
#: The prefix of the flattened config group that defines the probe.
CORPUS_PREFIX = "corpus."
CORPUS_KIND_PARAM = "corpus.kind"
SCREEN_NAME_PARAM = "screen.name"
SCREEN_RECIPE_PARAM = "screen.recipe"
#: The classes the run reported (a JSON list); every registered class is logged anyway.
SCREEN_CLASSES_PARAM = "screen.classes"
#: ``screen.thresholds.<class>``: the threshold the run's flags and counts used.
THRESHOLD_PARAM_PREFIX = "screen.thresholds."
#: The head classes the run computed and logged (a JSON list).
LOGGED_CLASSES_PARAM = "screen.logged_classes"
#: Settings that change how much goes through one forward pass, never the results: left out
#: of a run's identity (its hash and its probe key).
THROUGHPUT_PARAMS = ("corpus.batch_size", "screen.memory_gb")
#: Screen settings that change the measured selectivities (not just what is reported or
#: flagged): runs whose settings differ here measure different things.
MEASURE_PARAMS = ("screen.recipe", "screen.local_window", "screen.xu2026.baseline_positions",
                  "screen.xu2026.baseline_seed", "screen.xu2026.floor")
#: Values assumed for a measure param a run did not log (runs from before the param).
MEASURE_DEFAULTS = {"screen.recipe": "project", "screen.local_window": "4"}

# --- metrics --------------------------------------------------------------------------------

#: All heads of the model (the n of every whole-model count).
N_HEADS_TOTAL_METRIC = "n_heads_total"
MEAN_FIRST_TOKEN_METRIC = "mean_first_token_attention"
INDUCTION_LOSS_METRIC = "induction_loss"
INDUCTION_ACCURACY_METRIC = "induction_accuracy"
PR_MEAN_METRIC = "pr.mean"
PR_INDUCTION_MEAN_METRIC = "pr.induction_mean"
TOKENS_METRIC = "tokens"
#: Whole-model continuous metrics besides the per-class ``mean_selectivity.<class>``
#: (Schaeffer et al. 2023: report these beside the counts).
CONTINUOUS_METRICS = (MEAN_FIRST_TOKEN_METRIC, INDUCTION_LOSS_METRIC, INDUCTION_ACCURACY_METRIC, PR_MEAN_METRIC,
                      PR_INDUCTION_MEAN_METRIC)

#: Per-class metric kinds: ``count.<c>`` flagged heads, ``fraction.<c>`` flagged / all
#: heads, ``mean_selectivity.<c>`` mean S_c over heads (infinite values left out).
COUNT, FRACTION, MEAN_SELECTIVITY, LAYER_COUNT = "count", "fraction", "mean_selectivity", "layer_count"


def count_metric(head_class: str) -> str:
    return f"{COUNT}.{head_class}"


def fraction_metric(head_class: str) -> str:
    return f"{FRACTION}.{head_class}"


def mean_selectivity_metric(head_class: str) -> str:
    return f"{MEAN_SELECTIVITY}.{head_class}"


def layer_count_metric(layer: int, head_class: str) -> str:
    """Flagged heads of ``head_class`` in one layer."""
    return f"layer{int(layer)}.{COUNT}.{head_class}"


@dataclass(frozen=True)
class MetricName:
    """A per-class metric name taken apart: ``kind`` (:data:`COUNT`, :data:`FRACTION`,
    :data:`MEAN_SELECTIVITY` or :data:`LAYER_COUNT`), the class, and the layer for
    :data:`LAYER_COUNT`."""

    kind: str
    head_class: str
    layer: Optional[int] = None


_CLASS_METRIC = re.compile(r"^(count|fraction|mean_selectivity)\.([a-z][a-z0-9_]*)$")
_LAYER_METRIC = re.compile(r"^layer(\d+)\.count\.([a-z][a-z0-9_]*)$")


def parse_metric(name: str) -> Optional[MetricName]:
    """The per-class metric ``name`` taken apart, or None for any other metric."""
    m = _CLASS_METRIC.match(name)
    if m:
        return MetricName(m.group(1), m.group(2))
    m = _LAYER_METRIC.match(name)
    if m:
        return MetricName(LAYER_COUNT, m.group(2), int(m.group(1)))
    return None


# --- heads.csv ------------------------------------------------------------------------------

HEADS_ARTIFACT = "heads.csv"
CONFIG_ARTIFACT = "config.yaml"
#: The head of a row: layer index and head index within the layer.
HEAD_KEY_COLUMNS = ("layer", "head")
#: The flagged class with the largest S_c / threshold_c ("" when none).
PRIMARY_COLUMN = "primary"
#: Mean attention on key 0 over all queries q >= 1.
FIRST_TOKEN_COLUMN = "first_token_attention"
#: Participation ratio columns, present when the PR screen ran.
PR_COLUMNS = ("pr", "pr_corrected", "pr_samples")


def selectivity_column(head_class: str) -> str:
    return f"selectivity.{head_class}"


def flag_column(head_class: str) -> str:
    return f"flag.{head_class}"


def column_class(column: str) -> Optional[str]:
    """The class of a ``selectivity.<c>`` or ``flag.<c>`` column, else None."""
    prefix, dot, head_class = column.partition(".")
    return head_class if dot and prefix in ("selectivity", "flag") else None


# --- run identity ---------------------------------------------------------------------------

@dataclass(frozen=True)
class RunSeed:
    """Which training run of a seed suite a run measured: ``seed`` (text), ``kind`` (one of
    :data:`SEED_KINDS`) and ``group`` (the suite: the runs ``stats`` pools)."""

    seed: str
    kind: str
    group: str

    def __post_init__(self):
        if self.kind not in SEED_KINDS:
            raise ValueError(f"seed kind {self.kind!r}: valid {', '.join(SEED_KINDS)}")

    @property
    def label(self) -> str:
        """``seed 3``, ``data-seed 1`` or ``weight-seed 2`` (PolyPythias' repo names)."""
        return f"seed {self.seed}" if self.kind == "both" else f"{self.kind}-seed {self.seed}"

    def params(self) -> dict:
        return {SEED_PARAM: self.seed, SEED_KIND_PARAM: self.kind, SEED_GROUP_PARAM: self.group}


def recipe_seed(group: str, seed, data_seed=None, init_seed=None) -> RunSeed:
    """The :class:`RunSeed` of a toy run from its recipe's ``seed``, ``data_seed`` and ``init_seed``
    (null: from ``seed``). Only ``init_seed`` pinned: the data order varies with ``seed`` (kind
    ``data``); only ``data_seed`` pinned: the initialisation does (``weight``); neither: both (seed
    ``seed``); both pinned: ``both``, seed ``d<data>-i<init>``."""
    none = (None, "None", "null", "")
    data_seed, init_seed = (None if v in none else int(v) for v in (data_seed, init_seed))
    if data_seed is None and init_seed is None:
        return RunSeed(str(int(seed)), "both", group)
    if data_seed is None:
        return RunSeed(str(int(seed)), "data", group)
    if init_seed is None:
        return RunSeed(str(int(seed)), "weight", group)
    return RunSeed(f"d{data_seed}-i{init_seed}", "both", group)


def run_seed(params: Mapping[str, str]) -> Optional[RunSeed]:
    """The :class:`RunSeed` a run logged (:data:`SEED_PARAM` ...); for a toy run from before those
    params, the one its recipe's seed params give (:func:`recipe_seed`); None for a run of no
    seed suite (a hub model, a local folder)."""
    model = str(params.get(MODEL_PARAM, "?"))
    if SEED_PARAM in params:
        kind = str(params.get(SEED_KIND_PARAM) or "both")
        return RunSeed(str(params[SEED_PARAM]), kind if kind in SEED_KINDS else "both",
                       str(params.get(SEED_GROUP_PARAM) or model))
    seed = params.get(RECIPE_SEED_PARAMS[0])
    if seed is None or not str(seed).lstrip("-").isdigit():
        return None
    return recipe_seed(model, seed, params.get(RECIPE_SEED_PARAMS[1]), params.get(RECIPE_SEED_PARAMS[2]))


@dataclass(frozen=True)
class RunIdentity:
    """What one screen run measured: a model at a revision, on a probe, with a screen, of one
    training run (``seed``) when the model is a seed suite.

    ``probe``: :func:`probe_key` of the run's params; ``measure``: :func:`measure_key`.
    Runs with equal (model, revision, probe, seed) are points of the same curves: ``stats``
    takes, per metric and per heads.csv column, the newest run that has it, and refuses
    runs of one (model, probe) whose ``measure`` differs. Runs without a seed are seed None,
    so a store from before the seed params reads as before.
    """

    model: str
    revision: str
    probe: str
    measure: str
    #: the training run of a seed suite (:func:`run_seed`); None for a model of one run
    seed: Optional[RunSeed] = None

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> "RunIdentity":
        return cls(params[MODEL_PARAM], params.get(REVISION_PARAM, "t" + str(params.get(TOKENS_PARAM, "?"))),
                   probe_key(params), measure_key(params), run_seed(params))


def _digest(items: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(dict(sorted(items.items()))).encode()).hexdigest()[:8]


def probe_key(params: Mapping[str, str]) -> str:
    """The probe a run screened, from its params: ``<corpus.kind>:<hash>`` with the hash
    over every other ``corpus.*`` param but the throughput ones (so a different seed, size
    or text file is a different probe); ``unknown`` for runs without corpus params."""
    corpus = {k: str(v) for k, v in params.items() if k.startswith(CORPUS_PREFIX) and k not in THROUGHPUT_PARAMS}
    if not corpus:
        return "unknown"
    kind = corpus.pop(CORPUS_KIND_PARAM, "unknown")
    return f"{kind}:{_digest(corpus)}" if corpus else kind


def probe_kind(key: str) -> str:
    """The corpus kind of a :func:`probe_key`."""
    return key.split(":", 1)[0]


def measure_key(params: Mapping[str, str]) -> str:
    """The screen settings that change measured selectivities (:data:`MEASURE_PARAMS`), as
    ``name=value`` pairs; ``screen.xu2026.*`` counts only for the ``xu2026`` recipe."""
    recipe = str(params.get(SCREEN_RECIPE_PARAM, MEASURE_DEFAULTS[SCREEN_RECIPE_PARAM]))
    parts = []
    for name in MEASURE_PARAMS:
        if name.startswith("screen.xu2026.") and recipe != "xu2026":
            continue
        value = params.get(name, MEASURE_DEFAULTS.get(name))
        if value is not None:
            parts.append(f"{name}={value}")
    return ", ".join(parts)
