"""``revisions: pythia``: a hub repo with Pythia's checkpoint schedule (:func:`pythia_revisions`),
computed, so no hub call is needed to list them; tokens = step x ``model.tokens.tokens_per_step``."""

from __future__ import annotations

from typing import List

from emergence import revisions as rv
from emergence.sources import tokens_per_step
from emergence.sources._hub import HubSource

#: Pythia's tokens a step: 1024 sequences x 2048 tokens.
PYTHIA_TOKENS_PER_STEP = 2_097_152


def pythia_revisions(tokens_per_step: int = PYTHIA_TOKENS_PER_STEP) -> List[rv.Revision]:
    """The 154 Pythia branches: step0, 1, 2, 4 .. 512, then 1000 .. 143000 every 1000;
    tokens = step x ``tokens_per_step``."""
    steps = [0] + [2**i for i in range(10)] + list(range(1000, 143001, 1000))
    return [rv.Revision(s * tokens_per_step, s, f"step{s}") for s in steps]


class PythiaSource(HubSource):
    name = "pythia"
    description = "hub repo, Pythia's computed schedule (154 branches, tokens = step x tokens_per_step)"

    def revisions(self, model) -> List[rv.Revision]:
        """Pythia's 154 branches (never ``main``: the final checkpoint is ``step143000``)."""
        return pythia_revisions(int(tokens_per_step(model, PYTHIA_TOKENS_PER_STEP)))


SOURCE = PythiaSource()
