"""Structured-config schemas for every config group under ``conf/``.

Each group (``model``, ``corpus``, ``revision``, ``screen``, ``tracking``) is a
dataclass here; the primary config ``conf/config.yaml`` lists the schema
``emergence_schema`` first in its defaults, so Hydra merges every group option into
a typed node: a misspelt key or a wrong type fails at composition and the error
names the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from emergence.toy.recipe import ToyRecipeConfig

#: The six head classes of the selectivity screen (METHODS section 5).
HEAD_CLASSES = ("induction", "previous_token", "duplicate_token", "bos", "self", "local")
#: Architecture families with an adapter.
FAMILIES = ("gpt_neox", "olmo", "olmoe")


@dataclass
class TokenCountConfig:
    """How a revision's training-token count is known.

    rule: ``per_step`` (tokens = step x tokens_per_step, Pythia), ``branch_suffix``
    (parsed from ``stepN-tokensXB`` branch names, OLMo/OLMoE) or ``recorded``
    (read from the checkpoint folder's ``revisions.json``, toy models).
    """

    rule: str = "per_step"
    tokens_per_step: Optional[int] = None


@dataclass
class ModelConfig:
    name: str = MISSING
    #: Hub repo id (``EleutherAI/pythia-1b``); loaded with ``from_pretrained(repo, revision=...)``.
    repo: Optional[str] = None
    #: Local folder holding one HF model folder per revision (``<path>/<revision>/``).
    path: Optional[str] = None
    family: str = MISSING
    pretraining_corpus: str = "unknown"
    tokens: TokenCountConfig = field(default_factory=TokenCountConfig)
    #: Where the revision list comes from: ``pythia`` (computed schedule), ``snapshot``
    #: (``emergence/snapshots/<name>.json``), ``folder`` (scan ``path``) or ``toy``.
    revisions: str = "snapshot"
    #: ``auto`` picks the family's safe default (float32 on CPU; never fp16 for GPT-NeoX).
    dtype: str = "auto"
    #: Training recipe, for models that the project trains itself (``revisions: toy``).
    recipe: Optional[ToyRecipeConfig] = None


@dataclass
class CorpusConfig:
    #: ``synthetic_induction`` (METHODS section 4), ``text_file`` or ``xu2026`` (the
    #: reference study's probe, ``[filler] A B [filler] A``; emergence/probes.py).
    kind: str = "synthetic_induction"
    n_sequences: int = 2000
    #: Length n of the repeated segment; sequences are ``[first] a1..an a1..an``.
    segment_length: int = 31
    seed: int = 0
    #: For ``xu2026``: token ids are drawn from [vocab_lo, vocab_hi) (the study: [100, 10000)).
    vocab_lo: int = 100
    vocab_hi: int = 10000
    #: For ``xu2026``: when the probe does not fit the model (vocab_hi past its usable
    #: vocabulary, seq_len past its context), draw from [1, usable vocabulary) and cut
    #: seq_len to the context, with a note; false: refuse in one line.
    fit_to_model: bool = False
    #: Token id at position 0; ``null`` = the model's bos id, else its eos id.
    first_token: Optional[int] = None
    batch_size: int = 100
    #: For ``text_file``: the file, the window length, and the stride between windows.
    #: ``seq_len`` is also the sequence length T of ``xu2026`` (the study: 256).
    path: Optional[str] = None
    seq_len: int = 64
    stride: Optional[int] = None
    #: For ``text_file``: prepend the model's first token to each window.
    prepend_first_token: bool = True


@dataclass
class RevisionConfig:
    #: ``logspaced`` | ``final`` | ``all`` | ``named``.
    select: str = "logspaced"
    #: Number of revisions for ``logspaced`` (first and last included).
    k: int = 10
    #: Revision name for ``select: named``.
    name: Optional[str] = None
    #: One revision of the selection, set by the multirun sweeper for each job.
    pin: Optional[str] = None


@dataclass
class PRConfig:
    #: Samples P of each head's output used for the participation ratio (fixed across revisions).
    samples: int = 2000
    seed: int = 0


@dataclass
class AblationConfig:
    #: ``zero`` or ``mean`` replacement of the group's o_proj-input slices.
    mode: str = "mean"
    #: ``induction`` (heads flagged induction at this revision) or ``list``.
    group: str = "induction"
    #: For ``group: list``: heads as ``"layer.head"`` strings.
    heads: List[str] = field(default_factory=list)
    #: Random control groups of the same size, drawn from the other heads.
    controls: int = 20
    #: Head classes whose heads flagged at this revision are left out of the control pool.
    #: Default ``[previous_token]``, a deliberate departure from METHODS section 7 (controls
    #: from every other head): previous-token heads are the upstream half of the induction
    #: circuit, and a control group holding them breaks induction as the group itself does
    #: (README, "Group ablation"). ``[]`` restores the METHODS pool.
    control_exclude: List[str] = field(default_factory=lambda: ["previous_token"])
    #: Probe sequences used by the ablation passes (the first ones of the probe).
    n_sequences: int = 500
    seed: int = 0


@dataclass
class Xu2026ScreenConfig:
    """The reference study's screen (``screen.recipe: xu2026``; emergence/screens/xu2026.py)."""

    #: Baseline: this many distinct key positions, drawn once with RandomState(baseline_seed).
    baseline_positions: int = 50
    baseline_seed: int = 0
    #: Selectivity = target / max(baseline, floor).
    floor: float = 1e-8
    #: Participation ratio over the first this many probe sequences (the study: 500).
    pr_sequences: int = 500


@dataclass
class ScreenConfig:
    name: str = "all"
    #: ``project`` (METHODS sections 5-7) or ``xu2026`` (the reference study's own recipe:
    #: last query, fixed random baseline, exp-entropy PR, per-layer matched ablation).
    recipe: str = "project"
    xu2026: Xu2026ScreenConfig = field(default_factory=Xu2026ScreenConfig)
    #: Classes reported (metrics and table columns); all six are always computed.
    classes: List[str] = field(default_factory=lambda: list(HEAD_CLASSES))
    #: Selectivity thresholds (x over a uniform head).
    thresholds: Dict[str, float] = field(
        default_factory=lambda: {
            "induction": 50.0,
            "previous_token": 30.0,
            "duplicate_token": 30.0,
            "bos": 30.0,
            "self": 30.0,
            "local": 10.0,
        }
    )
    #: Window w of the ``local`` class: targets q-w .. q-2.
    local_window: int = 4
    participation_ratio: bool = False
    pr: PRConfig = field(default_factory=PRConfig)
    ablation: Optional[AblationConfig] = None
    #: Memory budget (GiB) of the streaming pass's batches, on top of the weights; the batch
    #: size is what fits (emergence.loading.plan_batch_size), capped by ``corpus.batch_size``.
    #: null: 90% of the free GPU memory on CUDA (measured after loading), 4 GiB elsewhere.
    memory_gb: Optional[float] = None


@dataclass
class TrackingConfig:
    #: MLflow tracking URI; the default is an absolute SQLite file under ``outputs/``.
    uri: str = MISSING
    #: Artifact root for new experiments; null: beside the store (``<store folder>/mlartifacts``
    #: for a local store, the server's artifact destination for a tracking server).
    artifacts: Optional[str] = None
    #: One experiment per study.
    experiment: str = "emergence"
    #: Tag value shared by the runs of one sweep; default: the Hydra sweep folder.
    sweep: Optional[str] = None
    #: The sweep's parent run (set by the sweeper for its jobs; children tag ``mlflow.parentRunId``).
    parent_run: Optional[str] = None
    #: A running job refreshes its run's ``emergence.heartbeat`` tag this often (seconds).
    heartbeat_s: float = 60.0
    #: A RUNNING claim whose heartbeat is older than this (seconds), or whose process is gone
    #: (same host, pid not alive), is dead: the next job of that identity deletes it and claims anew.
    stale_after_s: float = 600.0
    #: Tracking server only: seconds to wait after creating a claim before re-reading the
    #: rival claims (a local SQLite store claims under a file lock instead).
    claim_settle_s: float = 1.0


@dataclass
class CacheConfig:
    #: Delete a screened hub revision from the HF cache after its run is logged.
    evict: bool = False
    #: Where the toy suite's checkpoints are trained to.
    toy_dir: str = MISSING


@dataclass
class EmergenceConfig:
    model: ModelConfig = MISSING
    corpus: CorpusConfig = MISSING
    revision: RevisionConfig = MISSING
    screen: ScreenConfig = MISSING
    tracking: TrackingConfig = MISSING
    cache: CacheConfig = field(default_factory=CacheConfig)
    #: ``auto`` = cuda if available, else mps, else cpu.
    device: str = "auto"
    #: Re-run a job even when a finished run with the same config exists.
    force: bool = False
    #: Print the per-family summary table at the end.
    report: bool = True
    #: Then write the statistics report (``python -m stats`` on this job's models).
    stats: bool = True
    #: Print the planned jobs (model, revision, tokens, download size when the HF cache
    #: knows it) and exit 0: offline, no model loaded, no MLflow run.
    dry_run: bool = False
    #: Extra free-form metadata logged as params (``+meta.study=...``).
    meta: Dict[str, Any] = field(default_factory=dict)


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="emergence_schema", node=EmergenceConfig)


register_configs()
