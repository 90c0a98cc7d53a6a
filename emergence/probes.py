"""Probe corpora: the token batches a screen runs on.

``synthetic_induction`` (METHODS section 4): N sequences ``[first] a1 .. an a1 .. an``,
``a1..an`` drawn without replacement from the vocabulary minus special tokens,
seeded; position 0 holds a fixed first token (default the model's bos id, else eos).
``text_file``: windows of a local text file tokenised with the model's tokenizer.

Class targets are not stored here: the screen derives them from the tokens (the
earlier copy of token q, the key after it), so one definition serves both corpora.
For the synthetic probe this gives exactly METHODS' targets: query n+i has its
duplicate target at i and its induction target at i+1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

import numpy as np
import torch

from emergence import EmergenceError

CORPORA = ("synthetic_induction", "text_file")


@dataclass
class Probe:
    input_ids: torch.Tensor  # [N, T] int64
    kind: str
    first_token: Optional[int]
    batch_size: int
    description: str

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


def build_probe(corpus, config, tokenizer=None) -> Probe:
    """The probe a corpus config describes, for a model's config and tokenizer."""
    if corpus.kind not in CORPORA:
        raise EmergenceError(f"unknown corpus kind {corpus.kind!r}; valid: {', '.join(CORPORA)}")
    if corpus.kind == "synthetic_induction":
        first = first_token_id(config, tokenizer, corpus.first_token)
        specials = special_token_ids(config, tokenizer) | {first}
        vocab = [i for i in range(usable_vocab_size(config, tokenizer)) if i not in specials]
        return synthetic_induction(vocab, corpus.n_sequences, corpus.segment_length, first,
                                   corpus.seed, corpus.batch_size)
    first = first_token_id(config, tokenizer, corpus.first_token) if corpus.prepend_first_token else None
    return text_file(corpus.path, tokenizer, corpus.n_sequences, corpus.seq_len, corpus.stride,
                     first, corpus.batch_size)
