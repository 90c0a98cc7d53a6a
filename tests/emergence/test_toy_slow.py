"""Slow: train one family with its real recipe and check the induction transition (issue 3, point 5).

The selectivities here are a small stand-alone computation of METHODS section 5 on
the synthetic probe ``[first] a1..an a1..an`` (n = 31), from ``output_attentions``
under eager attention:

- induction: S = sum over queries q = n+i (i = 1..n) of A[q, i+1], over the sum of
  the mean attention on one visible non-target key, key 0 left out of the baseline;
- bos: S = sum over q >= 1 of A[q, 0], over the sum of the mean attention on one
  other visible key;
- induction loss: cross-entropy of a_{i+1} at positions n+i, i = 1..n-1.

Run with ``pytest -m slow tests/emergence/test_toy_slow.py -s`` to see the trajectory.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from emergence.toy import as_recipe, checkpoint_schedule, ensure_trained

ROOT = Path(__file__).resolve().parents[2]
FAMILY_RECIPE = os.environ.get("EMERGENCE_SLOW_RECIPE", "neox")
INDUCTION_THRESHOLD, BOS_THRESHOLD = 50.0, 30.0


def synthetic_probe(vocab_size: int, first: int, n: int = 31, n_sequences: int = 200, seed: int = 0):
    rng = np.random.default_rng(seed)
    pool = np.array([t for t in range(vocab_size) if t != first])
    a = np.stack([rng.choice(pool, n, replace=False) for _ in range(n_sequences)])
    return torch.from_numpy(np.concatenate([np.full((n_sequences, 1), first), a, a], axis=1))


@torch.no_grad()
def selectivities(path, ids: torch.Tensor, n: int = 31):
    """(induction [L, H], bos [L, H], induction loss) of the checkpoint at ``path``."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    out = model(input_ids=ids, output_attentions=True)
    A = torch.stack([a.double().mean(0) for a in out.attentions])  # [L, H, T, T]
    T = A.shape[-1]
    q = torch.arange(n + 1, 2 * n + 1)
    target = A[:, :, q, q - n + 1]
    key0 = A[:, :, q, 0]
    baseline = (1.0 - target - key0) / (q - 1).double()  # q+1 visible keys, less key 0 and the target
    induction = target.sum(-1) / baseline.sum(-1)
    qb = torch.arange(1, T)
    on0 = A[:, :, qb, 0]
    bos = on0.sum(-1) / ((1.0 - on0) / qb.double()).sum(-1)
    logits = out.logits[:, n + 1:2 * n].double()
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 2:n + 1].reshape(-1))
    return induction.numpy(), bos.numpy(), float(loss)


@pytest.mark.slow
def test_real_recipe_forms_induction_heads(toy_cache):
    """Trains (or reuses, from the session's toy cache shared with test_toy_circuits.py) the
    registered toy model of ``EMERGENCE_SLOW_RECIPE`` (default ``neox``)."""
    recipe = as_recipe(OmegaConf.load(ROOT / "conf" / "recipe" / f"{FAMILY_RECIPE}.yaml"))
    start = time.perf_counter()
    folder = ensure_trained(recipe, toy_cache, f"toy_{FAMILY_RECIPE}", progress=False)
    train_s = time.perf_counter() - start
    ids = synthetic_probe(recipe.corpus.vocab_size, recipe.corpus.first_token)
    rows = []
    for rev in checkpoint_schedule(recipe):
        ind, bos, loss = selectivities(folder / rev["name"], ids)
        rows.append((rev, ind, bos, loss))
    print(f"\n{recipe.family}: trained (or found trained) in {train_s:.0f} s")
    for rev, ind, bos, loss in rows:
        layers = sorted({int(l) for l in np.nonzero(bos >= BOS_THRESHOLD)[0]})
        print(f"  {rev['name']:>9} {rev['tokens']:>10,} tok  induction heads {(ind >= INDUCTION_THRESHOLD).sum():2d}"
              f" (max {ind.max():7.1f})  bos heads {(bos >= BOS_THRESHOLD).sum():2d} layers {layers}"
              f"  induction loss {loss:.3f}")

    crossed = [i for i, (_, ind, _, _) in enumerate(rows) if (ind >= INDUCTION_THRESHOLD).any()]
    assert crossed, "no head crosses the induction threshold at any checkpoint"
    first = crossed[0]
    # The schedule straddles the transition: no induction head at step 0 or the first log-spaced step.
    assert first >= 2, f"induction already at {rows[first][0]['name']}: the schedule does not straddle it"
    assert (rows[-1][1] >= INDUCTION_THRESHOLD).any(), "the induction heads do not survive to the last checkpoint"
    # The probe's induction loss falls by at least half from the first checkpoint.
    assert rows[-1][3] <= 0.5 * rows[0][3], (rows[0][3], rows[-1][3])
