"""``revisions: crfm_gpt2``: Stanford CRFM's GPT-2 seed suites (the Mistral project, 2021).

Five GPT-2 small (124M) and five GPT-2 medium (355M) runs on OpenWebText that differ only in
their seed (:data:`RUNS`), 400,000 steps each, on the hub as ``stanford-crfm/<run>-gpt2-<size>-x<seed>``.

Their checkpoints are the branches ``checkpoint-N`` of each repo, at the steps of the training
config's ``checkpoint_frequency`` (stanford-crfm/mistral, conf/gpt2-mistral-{small,medium}-config.yaml):
every 10 steps to 100, every 50 to 2,000, every 100 to 20,000, every 1,000 to 400,000 (608 branches,
computed here, offline). Tokens: step x 524,288 (the effective batch of 512 sequences, from the same
config, x 1,024 tokens, GPT-2's context: the sequence length is inferred from the model, not stated in
the config). Whether a ``checkpoint-0`` branch exists is not confirmed: it is not listed.

One config picks a run: ``model=crfm_gpt2 model.size=small model.seed=49``; ``-m ... model.seed=21,49,81``
sweeps seeds. Every run logs its seed (``seed``, ``seed_kind: both``, ``seed_group``: the model name,
``crfm_gpt2_<size>``), as the PolyPythias do (emergence/sources/polypythia.py).
"""

from __future__ import annotations

from typing import Dict, List

from emergence import EmergenceError
from emergence import revisions as rv
from emergence.common.contract import RunSeed
from emergence.sources import model_get, tokens_per_step
from emergence.sources._hub import SeedSuiteSource

OWNER = "stanford-crfm"
#: size -> seed -> run name.
RUNS: Dict[str, Dict[int, str]] = {
    "small": {21: "alias", 49: "battlestar", 81: "caprica", 343: "darkmatter", 777: "expanse"},
    "medium": {21: "arwen", 49: "beren", 81: "celebrimbor", 343: "durin", 777: "eowyn"},
}
SIZES = tuple(RUNS)
#: ``checkpoint_frequency`` of the training configs: (every, until).
SCHEDULE = ((10, 100), (50, 2000), (100, 20000), (1000, 400000))
#: 512 sequences x 1,024 tokens a step.
TOKENS_PER_STEP = 512 * 1024


def checkpoint_steps() -> List[int]:
    """The steps of the ``checkpoint-N`` branches (608: 10, 20, .., 100, 150, .., 400000)."""
    steps, last = [], 0
    for every, until in SCHEDULE:
        steps += list(range(last + every, until + 1, every))
        last = until
    return steps


def repo_for(size: str, seed: int) -> str:
    """The hub repo of one run, or a one-line :class:`EmergenceError` naming the valid choices."""
    if size not in RUNS:
        raise EmergenceError(f"model.size={size!r} is not a CRFM GPT-2 size; valid: {', '.join(SIZES)}")
    if seed not in RUNS[size]:
        raise EmergenceError(f"model.seed={seed} is not a CRFM GPT-2 {size} run; valid: "
                             f"{', '.join(map(str, RUNS[size]))}")
    return f"{OWNER}/{RUNS[size][seed]}-gpt2-{size}-x{seed}"


class CrfmGpt2Source(SeedSuiteSource):
    name = "crfm_gpt2"
    description = "Stanford CRFM GPT-2 seed suites: repo from model.size and model.seed; checkpoint-N branches"
    example = f"model.size=small model.seed=21; sizes: {', '.join(SIZES)}"

    def repo(self, model) -> str:
        return repo_for(str(model_get(model, "size", "")), int(model_get(model, "seed", 0)))

    def check(self, model) -> None:
        super().check(model)
        for key in ("repo", "path"):
            if model_get(model, key):
                raise EmergenceError(f"model {model.name!r} has revisions: crfm_gpt2, which computes the repo from "
                                     f"model.size and model.seed, and model.{key}={model_get(model, key)!r}; drop it")
        self.repo(model)

    def revisions(self, model) -> List[rv.Revision]:
        per_step = int(tokens_per_step(model, TOKENS_PER_STEP))
        return [rv.Revision(step * per_step, step, f"checkpoint-{step}") for step in checkpoint_steps()]

    def run_seed(self, model) -> RunSeed:
        return RunSeed(str(int(model.seed)), "both", str(model.name))


SOURCE = CrfmGpt2Source()
