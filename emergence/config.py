"""Structured-config schemas for every config group under ``conf/``.

``conf/config.yaml`` lists the schema ``emergence_schema`` first in its defaults, so a misspelt
key or a wrong type fails at composition, naming the key. Each field's constraint (range,
choices) sits in its ``metadata`` (emergence/common/checks.py), a group's rules across its fields
beside its schema; :func:`check_config` checks a composed config against both, in one line, before
any model is loaded, and :func:`check_screen` a screen config handed to
:func:`emergence.screens.screen` directly. Torch-free.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from emergence import EmergenceError, families, sources
from emergence.common.contract import SEED_KINDS
from emergence.common import head_classes
from emergence.common.head_classes import local
from emergence.common.checks import SEED, check, constraint, problem
from emergence.common.plugins import Registry
from emergence.revisions import MIN_LOGSPACED, SELECTIONS
from emergence.sources import crfm_gpt2, polypythia
from emergence.toy.recipe import ToyRecipeConfig

#: The registries as they stand at import: the head classes of the screen (METHODS section 5;
#: emergence/common/head_classes/), the families (``model.family``; emergence/families/) and the
#: model sources (``model.revisions``; emergence/sources/).
HEAD_CLASSES = head_classes.names()
FAMILIES = families.family_names()
MODEL_SOURCES = sources.source_names()

#: ``model.dtype`` choices (``auto``: the family's safe default, see emergence/loading.py).
DTYPES = ("auto", "float32", "bfloat16", "float16")
#: ``screen.ablation.mode`` and ``screen.ablation.group`` choices.
ABLATION_MODES = ("zero", "mean")
ABLATION_GROUPS = ("induction", "list")
#: ``corpus.kind``: one :class:`emergence.probes.CorpusKind` each, imported on first use (no torch here).
CORPUS_KINDS = Registry("corpus kind", error=EmergenceError, lazy={
    "synthetic_induction": "emergence.probes:SYNTHETIC_INDUCTION", "text_file": "emergence.probes:TEXT_FILE",
    "xu2026": "emergence.probes:XU2026"})
#: ``screen.recipe``: one :class:`emergence.screens.recipes.ScreenRecipe` each, imported on first use.
SCREEN_RECIPES = Registry("screen.recipe", error=EmergenceError, lazy={
    "project": "emergence.screens.recipes:PROJECT", "xu2026": "emergence.screens.recipes:XU2026"})
#: ``device`` values (the schema's pattern, and emergence/loading.py ``choose_device``).
DEVICE_PATTERN = r"auto|cpu|mps|cuda(:\d+)?"
DEVICE_HINT = "auto, cpu, cuda, cuda:<i>, mps"
#: ``matmul_precision`` choices (emergence/loading.py, ``choose_matmul_precision``).
MATMUL_PRECISIONS = ("auto", "float32", "tf32")
#: ``live.mode`` choices (the schedules are emergence/live/schedule.py's ``SCHEDULES``).
LIVE_MODES = ("off", "adaptive")
#: The ``xu2026`` probe puts its pair at p in [20, seq_len // 2): seq_len // 2 must exceed 20.
XU2026_MIN_SEQ_LEN = 42


def model_sources() -> tuple:
    """``model.revisions`` choices: the source registry as it stands now (with registered sources)."""
    return sources.source_names()


@dataclass
class TokenCountConfig:
    """How a revision's training-token count is known where the source computes it: ``pythia`` and
    ``folder`` (without ``revisions.json``) compute step x ``tokens_per_step``; ``snapshot`` and
    ``toy`` read theirs."""

    #: Training tokens a step (``pythia``: 2,097,152 when null; ``folder``: 0 when null).
    tokens_per_step: Optional[int] = field(default=None, metadata={"min": 1})


@dataclass
class ModelConfig:
    name: str = MISSING
    #: Hub repo id (``EleutherAI/pythia-1b``) of the hub sources (``revisions: pythia`` or ``snapshot``).
    repo: Optional[str] = None
    #: For ``revisions: folder``: one HF model folder per revision (``<path>/<revision>/``).
    path: Optional[str] = None
    #: The architecture family (emergence/families/). ``auto``: the family of the first revision's
    #: ``config.json`` ``model_type`` (else the generic one); a named family is checked against it.
    family: str = field(default="auto", metadata={"choices": lambda: families.family_choices()})
    pretraining_corpus: str = "unknown"
    tokens: TokenCountConfig = field(default_factory=TokenCountConfig)
    #: The model source (emergence/sources/): where the revision list comes from and where each
    #: revision lies (``pythia``, ``snapshot``, ``folder``, ``toy``, the seed suites).
    revisions: str = field(default="snapshot", metadata={"choices": lambda: model_sources()})
    #: ``auto`` picks the family's safe default (float32 on CPU; never fp16 for GPT-NeoX).
    dtype: str = field(default="auto", metadata={"choices": DTYPES})
    #: Training recipe, for models that the project trains itself (``revisions: toy``).
    recipe: Optional[ToyRecipeConfig] = None
    #: Seed suites (``revisions: polypythia`` or ``crfm_gpt2``): the model size, the training run's
    #: seed and what it varies (``data`` order, ``weight`` initialisation, ``both``). Null for every
    #: other model (and then left out of a run's identity, so existing runs keep theirs).
    size: Optional[str] = field(default=None, metadata={"choices": lambda: polypythia.SIZES + crfm_gpt2.SIZES})
    seed: Optional[int] = field(default=None, metadata={"min": 1})
    seed_kind: Optional[str] = field(default=None, metadata={"choices": SEED_KINDS})


@dataclass
class CorpusConfig:
    #: ``synthetic_induction`` (METHODS section 4), ``text_file`` or ``xu2026`` (the
    #: reference study's probe, ``[filler] A B [filler] A``; emergence/probes.py).
    kind: str = field(default="synthetic_induction", metadata={"choices": CORPUS_KINDS.names()})
    #: At most MAX_PROBE_SEQUENCES, and the probe's tokens must fit in a quarter of the memory (:func:`check_corpus`).
    n_sequences: int = field(default=2000, metadata={"min": 1, "max": 1_000_000})
    #: Length n of the repeated segment; sequences are ``[first] a1..an a1..an``.
    segment_length: int = field(default=31, metadata={"min": 2, "max": 524_288})
    seed: int = field(default=0, metadata=SEED)
    #: For ``xu2026``: token ids are drawn from [vocab_lo, vocab_hi) (the study: [100, 10000)).
    vocab_lo: int = field(default=100, metadata={"min": 0})
    vocab_hi: int = field(default=10000, metadata={"min": 2})
    #: For ``xu2026``: when the probe does not fit the model's vocabulary or context, draw from
    #: [1, usable vocabulary) and cut seq_len to the context, with a note; false: refuse.
    fit_to_model: bool = False
    #: Token id at position 0; ``null`` = the model's bos id, else its eos id.
    first_token: Optional[int] = field(default=None, metadata={"min": 0})
    batch_size: int = field(default=100, metadata={"min": 1})
    #: For ``text_file``: the file, the window length (also ``xu2026``'s T; the study: 256), the stride.
    path: Optional[str] = None
    seq_len: int = field(default=64, metadata={"min": 2, "max": 1_048_576})
    stride: Optional[int] = field(default=None, metadata={"min": 1})
    #: For ``text_file``: prepend the model's first token to each window.
    prepend_first_token: bool = True


@dataclass
class RefineConfig:
    """Adaptive refinement (``revision=refine``; emergence/refine_rule.py): rounds of new revisions
    inside each class's bracket (its largest rise) until it lies between adjacent known revisions."""

    #: Classes whose transition is refined (their head counts' largest jump).
    classes: List[str] = field(default_factory=lambda: ["bos", "induction"],
                               metadata={"items": {"choices": head_classes.names}})
    #: New revisions a class a round (1: bisection in log tokens).
    per_round: int = field(default=1, metadata={"min": 1, "max": 64})
    #: At most this many rounds.
    rounds: int = field(default=8, metadata={"min": 1, "max": 64})
    #: Also bracket each class's largest decline, as its own entry ``<class> decline`` (by default
    #: only rises, the transitions the statistics report).
    declines: bool = False


@dataclass
class RevisionConfig:
    #: ``logspaced`` | ``final`` | ``all`` | ``named`` | ``refine`` (which starts from ``logspaced``).
    select: str = field(default="logspaced", metadata={"choices": lambda: SELECTIONS})
    #: Number of revisions for ``logspaced`` (first and last included).
    k: int = field(default=10, metadata={"min": MIN_LOGSPACED})
    #: Revision name for ``select: named``.
    name: Optional[str] = None
    #: One revision of the selection, set by the multirun sweeper for each job.
    pin: Optional[str] = None
    refine: RefineConfig = field(default_factory=RefineConfig)


@dataclass
class PRConfig:
    #: Samples P of each head's output used for the participation ratio (fixed across revisions).
    samples: int = field(default=2000, metadata={"min": 3})
    seed: int = field(default=0, metadata=SEED)


@dataclass
class AblationConfig:
    #: ``zero`` or ``mean`` replacement of the group's o_proj-input slices.
    mode: str = field(default="mean", metadata={"choices": ABLATION_MODES})
    #: ``induction`` (heads flagged induction at this revision) or ``list``.
    group: str = field(default="induction", metadata={"choices": ABLATION_GROUPS})
    #: For ``group: list``: heads as ``"layer.head"`` strings.
    heads: List[str] = field(default_factory=list, metadata={"items": {"pattern": r"\d+\.\d+", "hint": "'layer.head', e.g. '3.1'"}})
    #: Random control groups of the same size, drawn from the other heads.
    controls: int = field(default=20, metadata={"min": 0})
    #: Head classes whose heads flagged at this revision are left out of the control pool.
    #: Default ``[previous_token]``, a deliberate departure from METHODS section 7 (controls
    #: from every other head): previous-token heads are the upstream half of the induction
    #: circuit, and a control group holding them breaks induction as the group itself does
    #: (docs/definitions.md, "Group ablation"). ``[]`` restores the METHODS pool.
    control_exclude: List[str] = field(default_factory=lambda: ["previous_token"],
                                       metadata={"items": {"choices": head_classes.names}})
    #: Probe sequences used by the ablation passes (the first ones of the probe).
    n_sequences: int = field(default=500, metadata={"min": 1})
    seed: int = field(default=0, metadata=SEED)


@dataclass
class Xu2026ScreenConfig:
    """The reference study's screen (``screen.recipe: xu2026``; emergence/screens/xu2026.py)."""

    #: Baseline: this many distinct key positions, drawn once with RandomState(baseline_seed).
    baseline_positions: int = field(default=50, metadata={"min": 1})
    baseline_seed: int = field(default=0, metadata=SEED)
    #: Selectivity = target / max(baseline, floor).
    floor: float = field(default=1e-8, metadata={"gt": 0, "finite": True})
    #: Participation ratio over the first this many probe sequences (the study: 500).
    pr_sequences: int = field(default=500, metadata={"min": 1})


@dataclass
class ScreenConfig:
    name: str = "all"
    #: ``project`` (METHODS sections 5-7) or ``xu2026`` (the reference study's own recipe).
    recipe: str = field(default="project", metadata={"choices": SCREEN_RECIPES.names()})
    xu2026: Xu2026ScreenConfig = field(default_factory=Xu2026ScreenConfig)
    #: Classes reported (printed); every registered class is computed and logged anyway.
    classes: List[str] = field(default_factory=lambda: list(head_classes.names()),
                               metadata={"items": {"choices": head_classes.names}})
    #: Selectivity thresholds (x over a uniform head); a class left out gets its registry default.
    thresholds: Dict[str, float] = field(
        metadata={"keys": head_classes.names, "items": {"gt": 0, "finite": True}},
        default_factory=head_classes.default_thresholds,  # each class's registry default
    )
    #: Window w of the ``local`` class: targets q-w .. q-2.
    local_window: int = field(default=local.DEFAULT_WINDOW, metadata={"min": local.MIN_WINDOW})
    participation_ratio: bool = False
    pr: PRConfig = field(default_factory=PRConfig)
    ablation: Optional[AblationConfig] = None
    #: Memory budget (GiB) of the batches, on top of the weights (emergence.loading.plan_batch_size),
    #: capped by ``corpus.batch_size``; null: 90% of the free GPU memory on CUDA, 4 GiB elsewhere.
    memory_gb: Optional[float] = field(default=None, metadata={"gt": 0, "finite": True})


@dataclass
class TrackingConfig:
    #: MLflow tracking URI; the default is an absolute SQLite file under ``outputs/``.
    uri: str = MISSING
    #: Artifact root for new experiments; null: beside the store (a server's own destination).
    artifacts: Optional[str] = None
    #: One experiment per study (a name MLflow takes: not empty).
    experiment: str = "emergence"
    #: Tag value shared by the runs of one sweep; default: the Hydra sweep folder.
    sweep: Optional[str] = None
    #: The sweep's parent run (set by the sweeper for its jobs; children tag ``mlflow.parentRunId``).
    parent_run: Optional[str] = None
    #: A running job refreshes its run's ``emergence.heartbeat`` tag this often (seconds).
    heartbeat_s: float = field(default=60.0, metadata={"gt": 0, "finite": True})
    #: A RUNNING claim whose heartbeat is older than this (seconds), or whose process is gone, is
    #: dead: the next job of its identity deletes it. Must exceed ``heartbeat_s`` (:func:`check_tracking`).
    stale_after_s: float = field(default=600.0, metadata={"gt": 0, "finite": True})
    #: Tracking server only: seconds between creating a claim and re-reading the rival claims (a
    #: SQLite store claims under a file lock). Only a pause: the claim rule holds whatever it is.
    claim_settle_s: float = field(default=1.0, metadata={"min": 0, "finite": True})
    #: Tracking server only: a call the server does not answer fails after about this many seconds
    #: (retries included), and the job with it. Also the longest a claim waits for a rival's.
    timeout_s: float = field(default=60.0, metadata={"min": 5, "max": 3600, "finite": True})
    #: Seconds a tracking (or database) server has to answer the check made before any work.
    connect_timeout_s: float = field(default=10.0, metadata={"gt": 0, "finite": True})


@dataclass
class CacheConfig:
    #: Delete a screened hub revision from the HF cache after its run is logged: true, false, or null
    #: (auto): when the disk would not hold the revisions still to come (emergence/prefetch.py).
    evict: Optional[bool] = None
    #: Load the next revision while this one is screened: true, false, or null (CUDA only).
    load_ahead: Optional[bool] = None
    #: Where the toy suite's checkpoints are trained to.
    toy_dir: str = MISSING


@dataclass
class LiveConfig:
    """The ``live`` group (``conf/live/``): live screening while a model trains (emergence/live/);
    a live screen uses the job's ``corpus`` and ``screen`` with the sizes below."""

    #: ``off`` (default: no live screening, a toy keeps its fixed checkpoint schedule) or ``adaptive``
    #: (screen while training; save densely while a transition is under way, sparsely otherwise).
    mode: str = field(default="off", metadata={"choices": LIVE_MODES})
    #: Probe sequences of a live screen: its size sets the cost.
    n_sequences: int = field(default=64, metadata={"min": 1})
    #: Participation ratio in live screens (the detector does not need it).
    participation_ratio: bool = False
    #: Head classes whose counts the detector watches.
    classes: List[str] = field(default_factory=lambda: ["induction", "bos"],
                               metadata={"items": {"choices": head_classes.names}})
    #: Watch screens: at step 0 and on the log grid ``round(first_step * 10**(i / screens_per_decade))``.
    first_step: int = field(default=50, metadata={"min": 1})
    screens_per_decade: float = field(default=40.0, metadata={"gt": 0, "max": 1000, "finite": True})
    #: Sparse saves: the first screen at or after each point of a log grid this dense (from first_step).
    saves_per_decade: float = field(default=4.0, metadata={"gt": 0, "max": 1000, "finite": True})
    #: During a transition: screen and save every this many steps (the watch grid where it is finer).
    dense_every: int = field(default=25, metadata={"min": 1})
    #: A transition ends after this many dense screens without a trigger.
    settle: int = field(default=2, metadata={"min": 1})
    #: A watched count that moves by at least this many heads between screens (and by more than its
    #: flicker over the last ``window`` screens) starts a transition.
    min_jump: int = field(default=1, metadata={"min": 1})
    window: int = field(default=4, metadata={"min": 0})
    #: ... so does an induction-loss fall of at least this many nats between screens that is also
    #: larger than its fluctuation over the last ``window`` screens (null: counts only).
    loss_drop: Optional[float] = field(default=0.5, metadata={"gt": 0, "finite": True})
    #: Keep a CPU copy of the last screened weights: a jump also saves the screen before it.
    lookback: bool = True


def refines(cfg) -> bool:
    """Whether a job refines its model's transitions round by round (``revision=refine``, no pinned
    revision: a pinned one is a round's job under ``-m``, screened as any other; emergence/refine_rounds.py)."""
    return cfg.revision.select == "refine" and cfg.revision.pin is None


def trains_live(cfg) -> bool:
    """Whether a job trains its toy with live screening (``live=adaptive``: emergence/live/job.py)
    instead of screening the revisions its ``revision`` group selects."""
    return cfg.live.mode != "off"


@dataclass
class EmergenceConfig:
    model: ModelConfig = MISSING
    corpus: CorpusConfig = MISSING
    revision: RevisionConfig = MISSING
    screen: ScreenConfig = MISSING
    tracking: TrackingConfig = MISSING
    cache: CacheConfig = field(default_factory=CacheConfig)
    #: Live screening while a toy trains (``live=adaptive``; emergence/live/).
    live: LiveConfig = field(default_factory=LiveConfig)
    #: ``auto`` = cuda if available, else mps, else cpu.
    device: str = field(default="auto", metadata={"pattern": DEVICE_PATTERN, "hint": DEVICE_HINT})
    #: How a float32 model's matrix products run on CUDA: ``auto`` = TF32 where the family allows it,
    #: ``tf32``, or ``float32`` (IEEE, as the reference study). Not part of a run's identity (each run
    #: logs the precision it used).
    matmul_precision: str = field(default="auto", metadata={"choices": MATMUL_PRECISIONS})
    #: Re-run a job even when a finished run with the same config exists.
    force: bool = False
    #: Print the per-family summary table at the end.
    report: bool = True
    #: Then write the statistics report (``python -m stats`` on this job's models).
    stats: bool = True
    #: Print the planned jobs and exit 0: offline, no model loaded, no MLflow run.
    dry_run: bool = False
    #: Extra free-form metadata logged as params (``+meta.study=...``).
    meta: Dict[str, Any] = field(default_factory=dict)


def check_xu2026_values(vocab_lo: int, vocab_hi: int, seq_len: int) -> None:
    """An ``xu2026`` probe's token range and length, whatever the model (emergence/probes.py draws it)."""
    if vocab_lo < 0 or vocab_hi - vocab_lo < 2:
        raise EmergenceError(f"corpus.vocab_lo={vocab_lo} corpus.vocab_hi={vocab_hi} is not a token range; "
                             "need 0 <= vocab_lo and vocab_hi - vocab_lo >= 2")
    if seq_len < XU2026_MIN_SEQ_LEN:
        raise EmergenceError(f"corpus.seq_len={seq_len} is too short for the xu2026 probe; it must be >= "
                             f"{XU2026_MIN_SEQ_LEN} (the pair sits at p in [20, seq_len // 2))")


def check_probe_memory(corpus) -> None:
    """The probe's token ids (``n_sequences`` x its length, int64) must fit in a quarter of this
    machine's memory, checked before any model is loaded or trained."""
    length = 1 + 2 * int(corpus.segment_length) if corpus.kind == "synthetic_induction" else int(corpus.seq_len)
    try:
        have = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # (not POSIX: no bound from here)
        have = 2**62
    need = int(corpus.n_sequences) * length * 8
    if need > have // 4:
        fit = max(1, (have // 4) // (length * 8))
        raise EmergenceError(f"corpus.n_sequences={corpus.n_sequences} makes a probe of {need / 2**30:.1f} GiB "
                             f"({length} tokens a sequence), over a quarter of this machine's {have / 2**30:.0f} GiB; "
                             f"set corpus.n_sequences <= {fit}")


#: How much of a text file is read to tell text from a binary file.
TEXT_SNIFF_BYTES = 1 << 20


def text_problem(path: Path) -> Optional[str]:
    """Why the file ``path`` is no text corpus (empty, or binary: a NUL byte or not UTF-8 in its first
    megabyte), or None; read before any model is loaded."""
    try:
        with open(path, "rb") as f:
            head = f.read(TEXT_SNIFF_BYTES)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not head.strip():
        return "is empty"
    if b"\x00" in head:
        return "is a binary file, not text (it holds NUL bytes)"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the end of the sample
            return f"is not UTF-8 text (byte {exc.start})"
    return None


def check_corpus(corpus) -> None:
    """The ``corpus`` group's rules before any model is known (against the model: ``CorpusKind.check``,
    emergence/probes.py): a ``text_file`` probe needs a local text file, an ``xu2026`` probe a token
    range and a length its layout fits."""
    check_probe_memory(corpus)
    if corpus.kind == "text_file":
        if not corpus.path:
            raise EmergenceError("corpus=text_file needs corpus.path=FILE (a local text file)")
        path = Path(str(corpus.path)).expanduser()
        if not path.is_file():
            raise EmergenceError(f"corpus.path={corpus.path!r} is not a file; give a local text file")
        problem = text_problem(path)
        if problem:
            raise EmergenceError(f"corpus.path={corpus.path!r} {problem}; give a local UTF-8 text file")
    elif corpus.kind == "xu2026":
        check_xu2026_values(int(corpus.vocab_lo), int(corpus.vocab_hi), int(corpus.seq_len))


def check_tracking(tracking) -> None:
    """The ``tracking`` group's rules: a named experiment; and since a live claim refreshes its heartbeat
    every ``heartbeat_s``, ``stale_after_s`` (when a claim counts as dead) must be longer."""
    if not str(tracking.experiment).strip():
        raise EmergenceError(f"tracking.experiment={tracking.experiment!r} is empty; name the study's experiment, "
                             "e.g. tracking.experiment=emergence")
    if float(tracking.stale_after_s) <= float(tracking.heartbeat_s):
        raise EmergenceError(f"tracking.stale_after_s={tracking.stale_after_s} must exceed tracking.heartbeat_s="
                             f"{tracking.heartbeat_s} (a live claim would look dead and be screened again); "
                             "e.g. stale_after_s >= 3 x heartbeat_s")


def check_ablation(ablation) -> None:
    """The ``screen.ablation`` group's rule across its fields: ``group: list`` names its heads (that
    the model has them is checked once its shape is known: emergence/screens/ablation.py ``check_heads``)."""
    if ablation.group == "list" and not ablation.heads:
        raise EmergenceError("screen.ablation.group=list needs screen.ablation.heads=['layer.head', ...], "
                             "e.g. \"screen.ablation.heads=['3.1','2.0']\"")


def _rule(schema, name: str) -> dict:
    return constraint(next(f for f in dataclasses.fields(schema) if f.name == name))


def check_screen(screen) -> None:
    """Refuse (one line) a screen config handed to :func:`emergence.screens.screen` that its schema
    does not allow: its head classes and thresholds (in the screen's own words), then every field
    as :func:`check_config` checks it, and the ablation's rule."""
    valid = tuple(_rule(ScreenConfig, "classes")["items"]["choices"]())
    positive = _rule(ScreenConfig, "thresholds")["items"]
    for head_class in screen.classes:
        if head_class not in valid:
            raise EmergenceError(f"unknown head class {head_class!r} in screen.classes; valid: {', '.join(valid)}")
    for head_class, threshold in screen.thresholds.items():
        if head_class not in valid:
            raise EmergenceError(f"unknown head class {head_class!r} in screen.thresholds; valid: {', '.join(valid)}")
        if problem(threshold, positive):
            raise EmergenceError(f"screen.thresholds.{head_class}={threshold} must be a positive number "
                                 "(x over a uniform head)")
    check(screen, ScreenConfig, EmergenceError, "screen.")
    if screen.ablation is not None:
        check_ablation(screen.ablation)


def check_config(cfg) -> None:
    """Refuse (:class:`~emergence.EmergenceError`, one line) any value of a composed config that its
    schema, or a group's rules across its fields, do not allow."""
    check(cfg, EmergenceConfig, EmergenceError)
    check_corpus(cfg.corpus)
    check_tracking(cfg.tracking)
    if cfg.screen.ablation is not None:
        check_ablation(cfg.screen.ablation)


ConfigStore.instance().store(name="emergence_schema", node=EmergenceConfig)
