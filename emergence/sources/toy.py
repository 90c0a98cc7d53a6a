"""``revisions: toy``: the toy suite the project trains itself (emergence/toy/).

The revisions are the recipe's checkpoint schedule (``model.recipe``), known before
training. The suite is trained on first use (in the job's main thread, by
:meth:`ToySource.prepare`, or by :meth:`ToySource.locate` when a revision is loaded
directly) into ``<cache.toy_dir>/<name>-<recipe hash>/``, one HF folder per revision;
its vocabulary, context, layers and heads come from the recipe. Nothing is downloaded or evicted.
Each recipe seed is its own suite (its own folder) and its own training run of the model's seed
group (:meth:`ToySource.run_seed`): ``-m model.recipe.seed=0,1,2`` trains and screens three.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence

from emergence import EmergenceError
from emergence import revisions as rv
from emergence import toy  # (torch-free: the package imports its trainer only when one of these is used)
from emergence.common.contract import RunSeed, recipe_seed
from emergence.common.storecheck import folder_problem
from emergence.sources import Location, ModelLimits, ModelSource, model_get
from emergence.toy.recipe import estimated_training_seconds


class ToySource(ModelSource):
    name = "toy"
    description = "the project's toy suite, trained on first use from model.recipe"

    def check(self, model) -> None:
        if model_get(model, "recipe") is None:
            raise EmergenceError(f"model {model.name!r} has revisions: toy but no model.recipe")
        if model_get(model, "path"):
            raise EmergenceError(f"model {model.name!r} is a toy suite trained here (revisions: toy), and "
                                 f"model.path={model.path!r} is not read; for checkpoints of your own give "
                                 "model.path alone (no model=...), or model=<yours> with revisions: folder")

    def revisions(self, model) -> List[rv.Revision]:
        self.check(model)
        return sorted(rv.Revision(int(r["tokens"]), int(r["step"]), r["name"])
                      for r in toy.checkpoint_schedule(model.recipe))

    @staticmethod
    def _toy_dir(toy_dir: Optional[str]) -> Path:
        if not toy_dir:
            raise EmergenceError("the toy suite needs cache.toy_dir (where its checkpoints are trained to)")
        return Path(toy_dir)

    def write_problem(self, model, toy_dir: Optional[str] = None) -> Optional[str]:
        """A suite still to be trained needs a writable ``cache.toy_dir`` (a trained one is only read)."""
        folder = toy.suite_folder(model.recipe, self._toy_dir(toy_dir), model.name)
        if toy.is_complete(folder, model.recipe):
            return None
        return folder_problem(folder, "the toy cache (cache.toy_dir)")

    def prepare(self, model, revisions: Sequence[rv.Revision], toy_dir: Optional[str] = None,
                progress: bool = True) -> None:
        """Train the suite (once; resumes an interrupted training) before anything is fetched."""
        if revisions:
            toy.ensure_trained(model.recipe, self._toy_dir(toy_dir), model.name, progress=progress)

    def locate(self, model, revision: rv.Revision, toy_dir: Optional[str] = None,
               progress: bool = True) -> Location:
        folder = toy.ensure_trained(model.recipe, self._toy_dir(toy_dir), model.name, progress=progress)
        return Location(str(folder / revision.name))

    def fetch(self, model, revision: rv.Revision, known: Sequence[rv.Revision] = (),
              toy_dir: Optional[str] = None, progress: bool = True) -> str:
        """The trained revision's folder (trained by :meth:`prepare`; never trains here, in
        the download thread)."""
        folder = toy.suite_folder(model.recipe, self._toy_dir(toy_dir), model.name) / revision.name
        if not (folder / "config.json").exists():
            raise EmergenceError(f"toy checkpoint {str(folder)!r} is missing (no config.json); "
                                 "the suite is trained before its revisions are fetched")
        return str(folder)

    def declared_limits(self, model, revisions: Sequence[rv.Revision]) -> ModelLimits:
        recipe = model.recipe
        return ModelLimits(int(recipe.corpus.vocab_size), int(recipe.seq_len), model.name,
                           int(recipe.n_layers), int(recipe.n_heads))

    def download_sizes(self, model, revisions: Sequence[rv.Revision]) -> Dict[str, str]:
        return {r.name: "toy (trained here)" for r in revisions}

    def preparation(self, model, toy_dir: Optional[str] = None) -> str:
        """``train toy_neox: 2000 steps, about 2 min on 2 quiet CPU cores ...`` when its suite is not trained
        (resumed when a training was interrupted); '' when it is."""
        folder = toy.suite_folder(model.recipe, self._toy_dir(toy_dir), model.name)
        if toy.is_complete(folder, model.recipe):
            return ""
        minutes = estimated_training_seconds(model.recipe) / 60
        resumes = ", resuming an interrupted training" if (folder / toy.STATE_FILE).exists() else ""
        return (f"train {model.name}: {int(model.recipe.steps)} steps{resumes}, about "
                f"{max(1, round(minutes))} min on 2 quiet CPU cores (longer when the cores are shared)")

    def run_seed(self, model) -> RunSeed:
        """Every toy suite is one training run of its group (the model name), seeded by the recipe's
        ``seed``, ``data_seed`` and ``init_seed`` (:func:`emergence.common.contract.recipe_seed`)."""
        recipe = model.recipe
        return recipe_seed(str(model.name), model_get(recipe, "seed", 0), model_get(recipe, "data_seed"),
                           model_get(recipe, "init_seed"))

    def names_seed(self, model) -> bool:
        """Only a toy trained with another seed than the default (seed 0, no data or init seed)."""
        return self.run_seed(model) != recipe_seed(str(model.name), 0)


SOURCE = ToySource()
