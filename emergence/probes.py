"""Probe corpora: the token batches a screen runs on.

``synthetic_induction`` (METHODS section 4): N sequences ``[first] a1 .. an a1 .. an``,
``a1..an`` drawn without replacement from the vocabulary minus special tokens,
seeded; position 0 holds a fixed first token (default the model's bos id, else eos).
``text_file``: windows of a local text file tokenised with the model's tokenizer.
``xu2026``: the reference study's own probe, ``[filler] A B [filler] A`` (see
:func:`xu2026_batch`), with its pair layout (:class:`PairLayout`) for ``screen=xu2026``.

The corpus kind picks its :class:`CorpusKind` (check and builder) from the table
:data:`emergence.config.CORPUS_KINDS`.

Class targets are not stored here: the screen derives them from the tokens (the
earlier copy of token q, the key after it), so one definition serves both corpora.
For the synthetic probe this gives exactly METHODS' targets: query n+i has its
duplicate target at i and its induction target at i+1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence, Tuple

import numpy as np
import torch

from emergence import EmergenceError
from emergence.config import CORPUS_KINDS, XU2026_MIN_SEQ_LEN, check_corpus, check_xu2026_values
from emergence.sources import ModelLimits


@dataclass(frozen=True)
class PairLayout:
    """Where the ``xu2026`` probe wrote its pair, per sequence: A at ``position`` p, B
    (``target``) at p+1, A again at T-1. ``valid``: B occurs exactly once in
    ``seq[:T-1]`` (the study's rule for using a sequence in the induction and
    duplicate-token targets; then that occurrence is p+1)."""

    position: torch.Tensor  # [N] int64
    target: torch.Tensor  # [N] int64
    valid: torch.Tensor  # [N] bool

    def rows(self, start: int, stop: int) -> "PairLayout":
        return PairLayout(self.position[start:stop], self.target[start:stop], self.valid[start:stop])


@dataclass
class Probe:
    input_ids: torch.Tensor  # [N, T] int64
    kind: str
    first_token: Optional[int]
    batch_size: int
    description: str
    #: The pair layout of the ``xu2026`` probe; None for the other corpora.
    layout: Optional[PairLayout] = None

    def head(self, n: int, note: str = "") -> "Probe":
        """The first ``n`` sequences (layout included)."""
        layout = self.layout.rows(0, n) if self.layout is not None else None
        return Probe(self.input_ids[:n], self.kind, self.first_token, self.batch_size,
                     self.description + note, layout)

    @property
    def n_sequences(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def seq_len(self) -> int:
        return int(self.input_ids.shape[1])

    def batches(self) -> Iterator[torch.Tensor]:
        for start in range(0, self.n_sequences, self.batch_size):
            yield self.input_ids[start:start + self.batch_size]


def first_token_id(config, tokenizer=None, override: Optional[int] = None) -> int:
    """The fixed token at position 0: ``override``, else the bos id, else the eos id."""
    if override is not None:
        return int(override)
    for source in (tokenizer, config):
        for attr in ("bos_token_id", "eos_token_id"):
            value = getattr(source, attr, None) if source is not None else None
            if isinstance(value, (list, tuple)):
                value = value[0] if value else None
            if value is not None:
                return int(value)
    raise EmergenceError("the model has neither a bos nor an eos token id; set corpus.first_token=<id>")


def special_token_ids(config, tokenizer=None) -> set:
    ids = set()
    if tokenizer is not None:
        ids.update(int(i) for i in tokenizer.all_special_ids)
    for attr in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = getattr(config, attr, None)
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return ids


def usable_vocab_size(config, tokenizer=None) -> int:
    """Rows of the embedding that are real tokens (Pythia pads its embedding past the tokenizer)."""
    size = int(config.vocab_size)
    return min(size, len(tokenizer)) if tokenizer is not None else size


def synthetic_induction(vocab: Sequence[int], n_sequences: int, segment_length: int, first_token: int,
                        seed: int, batch_size: int) -> Probe:
    vocab = np.asarray(sorted(set(vocab)), dtype=np.int64)
    if segment_length < 2 or segment_length > len(vocab):
        raise EmergenceError(f"corpus.segment_length={segment_length} must be in [2, {len(vocab)}] "
                             "(the usable vocabulary)")
    rng = np.random.default_rng(seed)
    # Draw without replacement per sequence: the first n of a random permutation's keys.
    keys = rng.random((n_sequences, len(vocab)))
    picks = np.argpartition(keys, segment_length - 1, axis=1)[:, :segment_length]
    segment = vocab[picks]
    rng.permuted(segment, axis=1, out=segment)
    first = np.full((n_sequences, 1), first_token, dtype=np.int64)
    ids = np.concatenate([first, segment, segment], axis=1)
    return Probe(torch.from_numpy(ids), "synthetic_induction", first_token, batch_size,
                 f"synthetic_induction N={n_sequences} n={segment_length} seed={seed} first={first_token}")


def text_file(path: str, tokenizer, n_sequences: int, seq_len: int, stride: Optional[int],
              first_token: Optional[int], batch_size: int) -> Probe:
    file = Path(path)
    if not file.is_file():
        raise EmergenceError(f"corpus.path={path!r} is not a file; give a local text file")
    if tokenizer is None:
        raise EmergenceError("corpus=text_file needs the model's tokenizer, and this model has none")
    ids = tokenizer(file.read_text(), add_special_tokens=False)["input_ids"]
    body = seq_len - (1 if first_token is not None else 0)
    stride = stride or body
    windows = [ids[i:i + body] for i in range(0, len(ids) - body + 1, stride)][:n_sequences]
    if not windows:
        raise EmergenceError(f"corpus.path={path!r} has {len(ids)} tokens, fewer than one window of {body}")
    tensor = torch.tensor(windows, dtype=torch.long)
    if first_token is not None:
        tensor = torch.cat([torch.full((len(windows), 1), first_token, dtype=torch.long), tensor], dim=1)
    return Probe(tensor, "text_file", first_token, batch_size,
                 f"text_file {file.name} windows={len(windows)} len={seq_len}")


def xu2026_batch(n_sequences: int, seq_len: int, vocab_lo: int, vocab_hi: int,
                 seed: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The reference study's probe batch: token ids [N, T], pair positions p [N], B [N].

    One numpy legacy ``RandomState(seed)`` for the whole batch, and per sequence the
    study's random calls in its order (``build_induction_batch`` of its scripts):

    1. ``seq = randint(lo, hi, size=T)`` (filler);
    2. ``a, b = choice(arange(lo, hi), size=2, replace=False)``;
    3. ``p = randint(20, T // 2)``; ``seq[p] = a``, ``seq[p+1] = b``;
    4. for k = 0..T-1 in order, if ``seq[k] == a`` and k != p: ``seq[k] = randint(lo, hi)``
       (one draw, not re-checked); then the same pass for b (k != p+1);
    5. ``seq[T-1] = a``.

    Layout ``[filler] A B [filler] A``; position 0 is a filler token (no BOS). Step 4
    is computed from the indices that match, in ascending order: a redraw at k changes
    only ``seq[k]``, so the draws and their order are the study's.
    """
    check_xu2026_values(vocab_lo, vocab_hi, seq_len)
    rng = np.random.RandomState(seed)
    tokens = np.zeros((n_sequences, seq_len), dtype=np.int64)
    positions = np.zeros(n_sequences, dtype=np.int64)
    targets = np.zeros(n_sequences, dtype=np.int64)
    population = np.arange(vocab_lo, vocab_hi)
    index = np.arange(seq_len)
    for i in range(n_sequences):
        seq = rng.randint(vocab_lo, vocab_hi, size=seq_len).astype(np.int64)
        a, b = rng.choice(population, size=2, replace=False)
        p = rng.randint(20, seq_len // 2)
        seq[p], seq[p + 1] = a, b
        for k in np.flatnonzero((seq == a) & (index != p)):
            seq[k] = rng.randint(vocab_lo, vocab_hi)
        for k in np.flatnonzero((seq == b) & (index != p + 1)):
            seq[k] = rng.randint(vocab_lo, vocab_hi)
        seq[-1] = a
        tokens[i], positions[i], targets[i] = seq, p, b
    return tokens, positions, targets


def xu2026(n_sequences: int, seq_len: int, vocab_lo: int, vocab_hi: int, seed: int, batch_size: int,
           note: str = "") -> Probe:
    """The study's probe (:func:`xu2026_batch`) with its :class:`PairLayout`."""
    tokens, positions, targets = xu2026_batch(n_sequences, seq_len, vocab_lo, vocab_hi, seed)
    valid = (tokens[:, :-1] == targets[:, None]).sum(1) == 1
    layout = PairLayout(torch.from_numpy(positions), torch.from_numpy(targets), torch.from_numpy(valid))
    return Probe(torch.from_numpy(tokens), "xu2026", None, batch_size,
                 f"xu2026 N={n_sequences} T={seq_len} vocab=[{vocab_lo},{vocab_hi}) seed={seed}{note}", layout)


def limits_of(config, tokenizer=None, model: str = "the model") -> ModelLimits:
    return ModelLimits.of(config, usable_vocab_size(config, tokenizer), model)


def _check_first_token(corpus, limits: Optional[ModelLimits]) -> None:
    first = getattr(corpus, "first_token", None)
    if first is not None and limits is not None and int(first) >= limits.vocab:
        raise EmergenceError(f"corpus.first_token={first} is not a token of {limits.model} (usable vocabulary: "
                             f"0-{limits.vocab - 1}); set corpus.first_token=null for its bos (else eos) id")


def check_synthetic_induction(corpus, limits: Optional[ModelLimits] = None) -> str:
    """A ``synthetic_induction`` probe (``[first] a1..an a1..an``, 1 + 2n tokens) must fit the
    model's context and its segment its vocabulary."""
    n = int(corpus.segment_length)
    _check_first_token(corpus, limits)
    if limits is not None and limits.context is not None and 1 + 2 * n > limits.context:
        raise EmergenceError(f"corpus.segment_length={n} makes probes of {1 + 2 * n} tokens (1 + 2n), longer than "
                             f"the context of {limits.model} ({limits.context} positions); set "
                             f"corpus.segment_length <= {(limits.context - 1) // 2}")
    if limits is not None and n > limits.vocab - 1:
        raise EmergenceError(f"corpus.segment_length={n} exceeds the usable vocabulary of {limits.model} "
                             f"({limits.vocab} tokens); set corpus.segment_length <= {limits.vocab - 1}")
    return ""


def check_text_file(corpus, limits: Optional[ModelLimits] = None) -> str:
    """A ``text_file`` probe needs a local file (the corpus group's rule, emergence/config.py), and
    its windows must fit the model's context."""
    check_corpus(corpus)
    T = int(corpus.seq_len)
    _check_first_token(corpus, limits)
    if limits is not None and limits.context is not None and T > limits.context:
        raise EmergenceError(f"corpus.seq_len={T} exceeds the context of {limits.model} ({limits.context} "
                             f"positions); set corpus.seq_len <= {limits.context}")
    return ""


@dataclass(frozen=True)
class Xu2026Shape:
    """The token range and length an ``xu2026`` probe is drawn with, and why."""

    vocab_lo: int
    vocab_hi: int
    seq_len: int
    note: str = ""


def xu2026_shape(corpus, limits: Optional[ModelLimits] = None) -> Xu2026Shape:
    """Check ``corpus`` (an ``xu2026`` corpus config) against a model's limits.

    ``corpus.fit_to_model``: when the configured probe does not fit the model (vocab_hi
    past its usable vocabulary, seq_len past its context), draw from [1, usable
    vocabulary) and cut seq_len to the context, with a note saying so; otherwise refuse
    in one line. A probe that fits is used exactly as configured.
    """
    lo, hi, T = int(corpus.vocab_lo), int(corpus.vocab_hi), int(corpus.seq_len)
    check_xu2026_values(lo, hi, T)
    if limits is None:
        return Xu2026Shape(lo, hi, T)
    too_wide = hi > limits.vocab
    too_long = limits.context is not None and T > limits.context
    if not (too_wide or too_long):
        return Xu2026Shape(lo, hi, T)
    if not corpus.fit_to_model:
        if too_wide:
            raise EmergenceError(f"corpus.vocab_hi={hi} exceeds the usable vocabulary of {limits.model} "
                                 f"({limits.vocab} tokens); set corpus.vocab_hi <= {limits.vocab} "
                                 "or corpus.fit_to_model=true")
        raise EmergenceError(f"corpus.seq_len={T} exceeds the context of {limits.model} ({limits.context} "
                             f"positions); set corpus.seq_len <= {limits.context} or corpus.fit_to_model=true")
    lo2, hi2 = (1, limits.vocab) if too_wide else (lo, hi)
    T2 = min(T, limits.context) if limits.context is not None else T
    if T2 < XU2026_MIN_SEQ_LEN:
        raise EmergenceError(f"the context of {limits.model} ({limits.context} positions) is too short for the "
                             f"xu2026 probe; it needs seq_len >= {XU2026_MIN_SEQ_LEN}")
    note = (f"{limits.model} is smaller than the xu2026 probe (vocab [{lo},{hi}), seq_len {T}): drawn with "
            f"corpus.vocab_lo={lo2} corpus.vocab_hi={hi2} corpus.seq_len={T2} instead, so this is not the "
            "study's batch (corpus.fit_to_model=false refuses)")
    return Xu2026Shape(lo2, hi2, T2, note)


def _synthetic_induction(corpus, config, tokenizer) -> Probe:
    first = first_token_id(config, tokenizer, corpus.first_token)
    specials = special_token_ids(config, tokenizer) | {first}
    vocab = [i for i in range(usable_vocab_size(config, tokenizer)) if i not in specials]
    return synthetic_induction(vocab, corpus.n_sequences, corpus.segment_length, first,
                               corpus.seed, corpus.batch_size)


def _text_file(corpus, config, tokenizer) -> Probe:
    first = first_token_id(config, tokenizer, corpus.first_token) if corpus.prepend_first_token else None
    return text_file(corpus.path, tokenizer, corpus.n_sequences, corpus.seq_len, corpus.stride,
                     first, corpus.batch_size)


def _xu2026(corpus, config, tokenizer) -> Probe:
    shape = xu2026_shape(corpus, limits_of(config, tokenizer))
    note = " (fitted to the model)" if shape.note else ""
    return xu2026(corpus.n_sequences, shape.seq_len, shape.vocab_lo, shape.vocab_hi, corpus.seed,
                  corpus.batch_size, note)


@dataclass(frozen=True)
class CorpusKind:
    """One ``corpus.kind`` (an entry of emergence/config.py ``CORPUS_KINDS``)."""

    name: str
    #: ``check(corpus config, ModelLimits or None) -> note`` ("" if none); raises on bad values.
    check: Callable[..., str]
    #: ``make(corpus config, model config, tokenizer) -> Probe``, once the corpus is checked.
    make: Callable[..., Probe]

    def build(self, corpus, config, tokenizer=None) -> Probe:
        """The probe for a model's config and tokenizer, after :attr:`check` against its limits."""
        self.check(corpus, limits_of(config, tokenizer, getattr(config, "_name_or_path", "") or "the model"))
        return self.make(corpus, config, tokenizer)


SYNTHETIC_INDUCTION = CorpusKind("synthetic_induction", check_synthetic_induction, _synthetic_induction)
TEXT_FILE = CorpusKind("text_file", check_text_file, _text_file)
XU2026 = CorpusKind("xu2026", lambda corpus, limits: xu2026_shape(corpus, limits).note, _xu2026)


def build_probe(corpus, config, tokenizer=None) -> Probe:
    """The probe a corpus config describes, for a model's config and tokenizer."""
    return CORPUS_KINDS.get(corpus.kind).build(corpus, config, tokenizer)
