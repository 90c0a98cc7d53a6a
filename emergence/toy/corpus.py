"""The toy suite's synthetic training corpus, generated locally from a seed.

Each sequence of ``seq_len`` tokens is

- position 0: the fixed first token ``first_token`` (the models' bos = eos id). It
  occurs nowhere else, so attending to it is a pure sink, never a copy;
- positions 1..: Zipf-like bigram text. For every token a next-token distribution
  ``p(j) ~ 1 / rank(j)^zipf_exponent`` over the other tokens, each token with its
  own random ranking (a random permutation), and the token at position 1 drawn from
  the same Zipf law under a global ranking;
- with probability ``repeat_fraction``: one segment of L random tokens, L uniform in
  ``[segment_min, segment_max]``, drawn without replacement from the vocabulary
  minus the first token, written at a random position p1 >= 1 and written again at
  a random later position p2 >= p1 + L (random gap, so a random offset p2 - p1).

The segment's tokens are uniform, so the bigram statistics cannot predict them;
since the offset varies from sequence to sequence, predicting the second copy
needs an induction head (find the earlier copy of the current token, read the token
after it) rather than a fixed-offset positional copy.

Determinism and resumption: the bigram table comes from
``numpy.random.default_rng([seed, 0])`` and the batch of training step s from
``default_rng([seed, 1, s])``; the stream has no state beyond the step number, so
a resumed training sees exactly the batches an uninterrupted one would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from emergence import EmergenceError


def check_training_corpus(corpus, seq_len: int) -> None:
    """Reject corpus settings that cannot generate a sequence (the message names the key)."""
    if corpus.vocab_size < 8:
        raise EmergenceError(f"recipe.corpus.vocab_size={corpus.vocab_size} is too small; use >= 8")
    if not 0 <= corpus.first_token < corpus.vocab_size:
        raise EmergenceError(f"recipe.corpus.first_token={corpus.first_token} must lie in "
                             f"[0, vocab_size={corpus.vocab_size})")
    if corpus.zipf_exponent < 0:
        raise EmergenceError(f"recipe.corpus.zipf_exponent={corpus.zipf_exponent} must be >= 0")
    if not 0.0 <= corpus.repeat_fraction <= 1.0:
        raise EmergenceError(f"recipe.corpus.repeat_fraction={corpus.repeat_fraction} must lie in [0, 1]")
    if not 1 <= corpus.segment_min <= corpus.segment_max:
        raise EmergenceError(f"recipe.corpus.segment_min={corpus.segment_min} and segment_max="
                             f"{corpus.segment_max} need 1 <= segment_min <= segment_max")
    if corpus.segment_max > corpus.vocab_size - 1:
        raise EmergenceError(f"recipe.corpus.segment_max={corpus.segment_max} exceeds the "
                             f"{corpus.vocab_size - 1} tokens a segment can draw from")
    if corpus.repeat_fraction > 0 and 1 + 2 * corpus.segment_max > seq_len:
        raise EmergenceError(f"recipe.seq_len={seq_len} cannot hold the first token and two copies of a "
                             f"segment_max={corpus.segment_max} segment; need seq_len >= "
                             f"{1 + 2 * corpus.segment_max}")


@dataclass
class RepeatInfo:
    """Where each sequence's repeated segment lies (-1 where it has none)."""

    length: np.ndarray  # [B]
    first: np.ndarray   # [B] start of the first copy
    second: np.ndarray  # [B] start of the second copy


class ToyCorpus:
    """Deterministic batches of the synthetic corpus: ``batch(step)`` is a pure function."""

    def __init__(self, corpus, seq_len: int, batch_size: int, seed: int):
        check_training_corpus(corpus, seq_len)
        self.cfg = corpus
        self.seq_len = int(seq_len)
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.first_token = int(corpus.first_token)
        #: the tokens of running text and segments: everything but the first token
        self.text_tokens = np.array([t for t in range(int(corpus.vocab_size)) if t != self.first_token],
                                    dtype=np.int64)
        rng = np.random.default_rng([self.seed, 0])
        n = len(self.text_tokens)
        zipf = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** float(corpus.zipf_exponent)
        zipf /= zipf.sum()
        # Row i: the next-token law after text token i, a Zipf law over its own ranking.
        probs = np.empty((n, n))
        for i in range(n):
            probs[i, rng.permutation(n)] = zipf
        self.bigram_cdf = np.cumsum(probs, axis=1)
        self.bigram_cdf[:, -1] = 1.0
        unigram = np.empty(n)
        unigram[rng.permutation(n)] = zipf
        self.unigram_cdf = np.cumsum(unigram)
        self.unigram_cdf[-1] = 1.0

    def batch(self, step: int, batch_size: Optional[int] = None, with_info: bool = False):
        """int64 [B, seq_len] tokens of training step ``step`` (and, optionally, the repeats)."""
        B = self.batch_size if batch_size is None else int(batch_size)
        T, cfg = self.seq_len, self.cfg
        rng = np.random.default_rng([self.seed, 1, int(step)])
        n = len(self.text_tokens)
        idx = np.empty((B, T - 1), dtype=np.int64)
        u = rng.random((B, T - 1))
        idx[:, 0] = np.minimum(np.searchsorted(self.unigram_cdf, u[:, 0], side="right"), n - 1)
        for t in range(1, T - 1):
            cdf = self.bigram_cdf[idx[:, t - 1]]  # [B, n]
            idx[:, t] = np.minimum((cdf <= u[:, t, None]).sum(axis=1), n - 1)
        tokens = np.empty((B, T), dtype=np.int64)
        tokens[:, 0] = self.first_token
        tokens[:, 1:] = self.text_tokens[idx]

        has = rng.random(B) < float(cfg.repeat_fraction)
        length, first, second = (np.full(B, -1, dtype=np.int64) for _ in range(3))
        for b in np.flatnonzero(has):
            L = int(rng.integers(cfg.segment_min, cfg.segment_max + 1))
            segment = rng.choice(self.text_tokens, size=L, replace=False)
            # p1 in [1, T - 2L], then p2 in [p1 + L, T - L]: both copies fit, in order.
            p1 = int(rng.integers(1, T - 2 * L + 1))
            p2 = int(rng.integers(p1 + L, T - L + 1))
            tokens[b, p1:p1 + L] = segment
            tokens[b, p2:p2 + L] = segment
            length[b], first[b], second[b] = L, p1, p2
        return (tokens, RepeatInfo(length, first, second)) if with_info else tokens
