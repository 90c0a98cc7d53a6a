"""``revisions: polypythia``: the PolyPythias seed suites (van der Wal et al., ICLR 2025).

Many training runs of one Pythia model that differ only in their random seeds, so that a
circuit's timing can be pooled across runs with its between-run variation (``stats``,
:mod:`stats.pooling`). The suite (:data:`SIZES`, :func:`suite_repos`), all under
``EleutherAI/`` on the hub:

- ``pythia-{size}-seed{1..9}`` for every size in :data:`SIZES` (14m, 31m, 70m, 160m, 410m):
  independent runs (``seed_kind: both``, data order and initialisation both re-seeded);
- ``pythia-{size}``: the original Pythia run of that size, seed :data:`ORIGINAL_SEED`
  (1234; ``seed_kind: both``);
- for 160m only (:data:`DECOUPLED`): ``pythia-160m-data-seed{1,2,3}`` (``seed_kind: data``:
  only the data order re-seeded, the initialisation fixed) and ``pythia-160m-weight-seed{1,2,3}``
  (``seed_kind: weight``: only the initialisation).

All were trained on the Pile (300B tokens) with Pythia's schedule: the same 154 branches
(``step0``, ``step1, 2, 4 .. 512``, ``step1000 .. step143000`` every 1000; 2,097,152 tokens a
step), computed here, so listing them needs no hub. The final checkpoint is the branch
``step143000``: ``main`` is never read (the weight-seed repos' ``main`` holds no weights at
all, only ``.gitattributes``).

One config picks a run: ``model=polypythia model.size=160m model.seed=3`` (``model.seed_kind``
defaults to ``both``), and ``-m model=polypythia model.size=160m model.seed=1,2,3`` sweeps the
seeds, one job per (seed, revision). Every run logs :class:`emergence.common.contract.RunSeed`: ``seed``,
``seed_kind`` and ``seed_group`` (the model name, ``polypythia_<size>``: the runs ``stats`` pools).
"""

from __future__ import annotations

from typing import List, Tuple

from emergence import EmergenceError
from emergence.common.contract import SEED_KINDS, RunSeed
from emergence.sources import model_get
from emergence.sources._hub import SeedSuiteSource
from emergence.sources.pythia import PythiaSource

OWNER = "EleutherAI"
#: Model sizes of the suite.
SIZES = ("14m", "31m", "70m", "160m", "410m")
#: Seeds of the PolyPythias runs (``seed_kind: both``) of every size.
SEEDS = tuple(range(1, 10))
#: The seed of the original Pythia run of each size (``EleutherAI/pythia-<size>``).
ORIGINAL_SEED = 1234
#: Sizes with decoupled runs: the seeds of their ``data`` and ``weight`` kinds.
DECOUPLED = {"160m": (1, 2, 3)}


def suite_seeds(size: str, kind: str) -> Tuple[int, ...]:
    """The seeds the suite holds for ``size`` and ``kind``."""
    if kind == "both":
        return SEEDS + (ORIGINAL_SEED,)
    return DECOUPLED.get(size, ())


def repo_for(size: str, seed: int, kind: str = "both") -> str:
    """The hub repo of one run; :class:`EmergenceError` (one line, the valid choices) when the
    suite has no such run."""
    if size not in SIZES:
        raise EmergenceError(f"model.size={size!r} is not a PolyPythias size; valid: {', '.join(SIZES)}")
    if kind not in SEED_KINDS:
        raise EmergenceError(f"model.seed_kind={kind!r}: valid {', '.join(SEED_KINDS)}")
    valid = suite_seeds(size, kind)
    if not valid:
        sizes = ", ".join(DECOUPLED)
        raise EmergenceError(f"model.seed_kind={kind} exists for size {sizes} only (model.size={size}); "
                             "use model.seed_kind=both")
    if seed not in valid:
        raise EmergenceError(f"model.seed={seed} is not a {kind}-seed run of pythia-{size}; valid: "
                             f"{', '.join(map(str, valid))}")
    if kind == "both":
        return f"{OWNER}/pythia-{size}" if seed == ORIGINAL_SEED else f"{OWNER}/pythia-{size}-seed{seed}"
    return f"{OWNER}/pythia-{size}-{kind}-seed{seed}"


def suite_repos() -> List[Tuple[str, str, int, str]]:
    """Every run of the suite as ``(size, kind, seed, repo)``: 5 sizes x (9 seeds + the
    original), plus 3 data and 3 weight seeds of 160m (56 repos)."""
    return [(size, kind, seed, repo_for(size, seed, kind))
            for size in SIZES for kind in SEED_KINDS for seed in suite_seeds(size, kind)]


class PolyPythiaSource(SeedSuiteSource):
    name = "polypythia"
    description = ("PolyPythias seed suites: repo from model.size, model.seed, model.seed_kind; Pythia's "
                   "154 branches")
    example = f"model.size=160m model.seed=1; sizes: {', '.join(SIZES)}"

    def repo(self, model) -> str:
        return repo_for(str(model_get(model, "size", "")), int(model_get(model, "seed", 0)),
                        str(model_get(model, "seed_kind", "both")))

    def check(self, model) -> None:
        super().check(model)
        if model_get(model, "repo"):
            raise EmergenceError(f"model {model.name!r} has revisions: polypythia, which computes the repo from "
                                 f"model.size, model.seed and model.seed_kind, and model.repo={model.repo!r}; "
                                 "drop model.repo, or use revisions: pythia for a repo of your own")
        self.refuse_path(model)
        self.repo(model)  # the size, seed and kind name a run of the suite

    revisions = PythiaSource.revisions

    def run_seed(self, model) -> RunSeed:
        return RunSeed(str(int(model.seed)), str(model_get(model, "seed_kind", "both")), str(model.name))


SOURCE = PolyPythiaSource()
