"""The toy suite's synthetic corpus: seeded, first token fixed, repeats at random offsets."""

from __future__ import annotations

import numpy as np
import pytest

from emergence import EmergenceError
from emergence.toy.corpus import ToyCorpus
from emergence.toy.recipe import ToyCorpusConfig


def corpus(**kw):
    return ToyCorpus(ToyCorpusConfig(**kw), seq_len=64, batch_size=256, seed=0)


def test_batches_are_a_pure_function_of_seed_and_step():
    a, b = corpus(), corpus()
    assert np.array_equal(a.batch(7), b.batch(7))
    assert np.array_equal(a.batch(7), a.batch(7))  # no hidden stream state
    assert not np.array_equal(a.batch(7), a.batch(8))
    other = ToyCorpus(ToyCorpusConfig(), seq_len=64, batch_size=256, seed=1)
    assert not np.array_equal(a.batch(7), other.batch(7))


def test_first_token_at_position_zero_only():
    c = corpus(first_token=3)
    tok = c.batch(0)
    assert tok.shape == (256, 64) and tok.dtype == np.int64
    assert (tok[:, 0] == 3).all()
    assert not (tok[:, 1:] == 3).any()
    assert tok.min() >= 0 and tok.max() < 128


def test_repeats_fraction_lengths_and_random_offsets():
    c = corpus(repeat_fraction=0.5, segment_min=6, segment_max=24)
    tok, info = c.batch(3, batch_size=2000, with_info=True)
    has = info.length > 0
    assert 0.45 < has.mean() < 0.55
    lengths = info.length[has]
    assert lengths.min() >= 6 and lengths.max() <= 24 and len(set(lengths.tolist())) > 15
    offsets = (info.second - info.first)[has]
    assert (offsets >= lengths).all()  # the copies do not overlap
    assert len(set(offsets.tolist())) > 20  # random offsets, not a fixed one
    for b in np.flatnonzero(has)[:200]:
        L, p1, p2 = info.length[b], info.first[b], info.second[b]
        assert p1 >= 1 and p2 + L <= 64
        seg = tok[b, p1:p1 + L]
        assert np.array_equal(seg, tok[b, p2:p2 + L])
        assert len(set(seg.tolist())) == L  # drawn without replacement


def test_no_repeats_when_fraction_is_zero():
    tok, info = corpus(repeat_fraction=0.0).batch(0, with_info=True)
    assert (info.length == -1).all()


def test_bigram_text_is_zipf_like():
    """Running text: each token's successor law is peaked (Zipf), unlike uniform noise."""
    c = corpus(repeat_fraction=0.0, zipf_exponent=1.1)
    tok = np.concatenate([c.batch(s) for s in range(8)])[:, 1:]
    prev, nxt = tok[:, :-1].ravel(), tok[:, 1:].ravel()
    top_share = []
    for t in np.unique(prev)[:30]:
        counts = np.bincount(nxt[prev == t], minlength=128)
        top_share.append(counts.max() / counts.sum())
    # Zipf(1.1) over 127 tokens gives its top successor ~0.2 of the mass; uniform ~0.008.
    assert np.mean(top_share) > 0.12


def test_corpus_that_cannot_fit_is_refused():
    with pytest.raises(EmergenceError, match="seq_len"):
        ToyCorpus(ToyCorpusConfig(segment_max=40), seq_len=64, batch_size=4, seed=0)
