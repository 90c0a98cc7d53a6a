"""``python -m emergence.families check DIR``: does a family screen this checkpoint correctly?

For someone adding an architecture (docs/families_and_sources.md, "Adding a family"). The
checkpoint (an HF model folder, or a folder of revisions: its first one) is loaded twice in
float32 on the CPU: as a screen loads it (emergence/loading.py: the family from its config,
SDPA where the class has it) and with transformers' eager attention as the reference. On a
few random sequences each check compares the screen's machinery with transformers' own:

1. ``family``: which family screens it (``model.family: auto``, or the one given) and its hooks;
2. ``attention rows``: the screen's per-head rows of every query (its own attention,
   emergence/screens/attention.py, read from the attention modules' outputs) against eager
   ``output_attentions``, every layer;
3. ``last-query rows``: the same for the rows of the last query only (the xu2026 recipe's);
4. ``attention output``: the model's last hidden states under the screen's attention against
   the eager forward;
5. ``head outputs``: the output projection's input is ``[batch, T, heads x head_dim]``;
6. ``head ablation``: a head zeroed at the projection input (emergence/screens/head_ablation.py)
   against an eager forward whose attention function zeroes that head's output where the
   attention computes it (independent of the family's hook paths: a wrong projection fails
   here); for a model without the attention interface (BLOOM), against a forward whose
   projection weights of that head are zeroed;
7. ``prefix reuse``: the same ablation through the prefix runner (emergence/screens/prefix.py).

One line per check (``ok`` or ``FAIL``, the largest difference and the tolerance); exit 1 when
one fails, 2 when the checkpoint is refused (no family covers it).
"""

from __future__ import annotations

import contextlib
import copy
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

import torch

from emergence import EmergenceError, families
from emergence.adapters import adapter_for
from emergence.loading import checkpoint_family
from emergence.probes import Probe
from emergence.revisions import folder_revisions
from emergence.screens.attention import uses_interface
from emergence.screens.base import Reducer, ScreenPart, base_model, run_pass
from emergence.screens.head_ablation import ablated
from emergence.screens.prefix import run_ablations

#: Largest absolute difference a check allows (float32 on the CPU).
TOLERANCE = 1e-4


@dataclass
class CheckLine:
    name: str
    passed: bool
    detail: str

    def __str__(self) -> str:
        return f"{'ok  ' if self.passed else 'FAIL'} {self.name}: {self.detail}"


def checkpoint_folder(path: str) -> Path:
    """The HF model folder to check: ``path`` itself, or its first revision."""
    folder = Path(path)
    if (folder / "config.json").is_file():
        return folder
    if not folder.is_dir():
        raise EmergenceError(f"{path!r} is not a folder; give an HF model folder (config.json) or a folder of revisions")
    return folder / folder_revisions(folder, None)[0].name


class _Record(Reducer):
    """Keeps what a pass hands it: attention rows, head outputs, last hidden states."""

    needs_hidden = True

    def __init__(self, rows=None, hidden_only: bool = False):
        self.attention_rows = rows
        self.needs_attention = self.needs_head_outputs = not hidden_only
        self.rows, self.heads, self.last = {}, {}, []

    def attention(self, layer, weights):
        self.rows.setdefault(layer, []).append(weights.clone())

    def head_outputs(self, layer, z):
        self.heads.setdefault(layer, []).append(z.clone())

    def hidden(self, last_hidden, model):
        self.last.append(last_hidden.clone())

    def finish(self) -> ScreenPart:
        return ScreenPart()


def _line(name: str, difference: float, what: str, ok: Optional[bool] = None) -> CheckLine:
    passed = difference <= TOLERANCE if ok is None else ok
    return CheckLine(name, passed, f"{what}: max |difference| {difference:.2e} (tolerance {TOLERANCE:g})")


@contextlib.contextmanager
def _zero_head_output(target, head: int):
    """Within the block, an eager forward computes ``target``'s attention with its model's own eager
    function and zeroes ``head``'s output ``[B, T, H, D]`` (transformers' ``eager`` attention
    replaced in its AttentionInterface, restored after)."""
    from transformers.modeling_utils import AttentionInterface

    own = sys.modules[type(target).__module__].eager_attention_forward

    def eager(module, query, key, value, attention_mask, **kwargs):
        out, weights = own(module, query, key, value, attention_mask, **kwargs)
        if module is target:
            out = out.clone()
            out[:, :, head, :] = 0
        return out, weights

    mapping = AttentionInterface._global_mapping
    saved = mapping.get("eager")
    mapping["eager"] = eager
    try:
        yield
    finally:
        mapping.pop("eager") if saved is None else mapping.__setitem__("eager", saved)


def _ablated_reference(eager, family, adapter, layer: int, head: int, ids) -> torch.Tensor:
    """The last hidden states of ``eager`` with ``head`` of ``layer`` removed, independently of the
    screen's hooks (:func:`_zero_head_output`; BLOOM: :func:`_zero_head_weights`)."""
    with torch.inference_mode():
        if uses_interface(eager) and hasattr(sys.modules[type(eager).__module__], "eager_attention_forward"):
            with _zero_head_output(family.attention_modules(eager)[layer], head):
                return base_model(eager)(input_ids=ids, use_cache=False).last_hidden_state
        twin = _zero_head_weights(eager, family, layer, head, adapter.head_dim)
        return base_model(twin)(input_ids=ids, use_cache=False).last_hidden_state


def _zero_head_weights(model, family, layer: int, head: int, head_dim: int):
    """A copy of ``model`` whose output projection of ``layer`` ignores ``head`` (its weights zeroed)."""
    twin = copy.deepcopy(model)
    projection = family.output_projections(twin)[layer]
    cols = slice(head * head_dim, (head + 1) * head_dim)
    with torch.no_grad():
        if hasattr(projection, "in_features"):  # nn.Linear: weight [out, in]
            projection.weight[:, cols] = 0
        else:  # transformers' Conv1D: weight [in, out]
            projection.weight[cols, :] = 0
    return twin


def run_checks(path: str, family: str = families.AUTO, n_sequences: int = 2, seq_len: int = 24,
               seed: int = 0, say: Callable[[str], None] = print) -> List[CheckLine]:
    """The checks of the module docstring on the checkpoint at ``path``; each line is passed to
    ``say`` as it is made."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    folder = checkpoint_folder(path)
    name, attention = checkpoint_family(family, str(folder), None, str(folder))
    chosen = families.get(name)
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation=attention, dtype=torch.float32).eval()
    eager = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
    adapter = adapter_for(model, name)
    layers, attn, projection = chosen.hook_paths(model)
    lines: List[CheckLine] = []

    def add(line: CheckLine) -> None:
        lines.append(line)
        say(str(line))

    add(CheckLine("family", True, f"{name} for model type {model.config.model_type!r} ({type(model).__name__}); "
                  f"layers {layers}, attention {attn}, projection {projection}; {adapter.n_layers} layers x "
                  f"{adapter.n_heads} heads x {adapter.head_dim}; loaded with {attention} attention"))
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, int(model.config.vocab_size), (n_sequences, seq_len), generator=generator)
    probe = Probe(ids, "random", None, n_sequences, "random tokens")
    with torch.inference_mode():
        reference = eager(input_ids=ids, output_attentions=True, use_cache=False)
        clean = base_model(eager)(input_ids=ids, use_cache=False).last_hidden_state
    for rows, label in ((None, "attention rows"), ((-1,), "last-query rows")):
        record = _Record(rows)
        run_pass(model, adapter, probe, [record], progress=False)
        worst = max(float((torch.cat(record.rows[i]) - (reference.attentions[i] if rows is None else
                                                         reference.attentions[i][:, :, -1:])).abs().max())
                    for i in range(adapter.n_layers))
        add(_line(label, worst, f"screen vs eager output_attentions, {adapter.n_layers} layers"))
        if rows is None:
            add(_line("attention output", float((torch.cat(record.last) - clean).abs().max()),
                      "last hidden states, screen's attention vs eager"))
            shapes = {tuple(torch.cat(z).shape) for z in record.heads.values()}
            want = (n_sequences, seq_len, adapter.n_heads, adapter.head_dim)
            add(CheckLine("head outputs", shapes == {want}, f"projection input read as {sorted(shapes)} "
                          f"per layer; expected {want}"))
    add_ablation_checks(model, eager, chosen, adapter, probe, clean, add)
    return lines


def add_ablation_checks(model, eager, family, adapter, probe: Probe, clean: torch.Tensor,
                        add: Callable[[CheckLine], None]) -> None:
    """Checks 6 and 7: one head of the first and one of the last layer ablated, three ways
    (``clean``: the eager model's last hidden states on the probe)."""
    for layer, head in ((0, adapter.n_heads - 1), (adapter.n_layers - 1, 0)):
        want = _ablated_reference(eager, family, adapter, layer, head, probe.input_ids)
        record = _Record((), hidden_only=True)
        with ablated(adapter, [(layer, head)], "zero"):
            run_pass(model, adapter, probe, [record], progress=False)
        moved = float((want - clean).abs().max())
        got = float((torch.cat(record.last) - want).abs().max())
        add(_line("head ablation", got, f"head {layer}.{head} zeroed at the projection input vs its attention output "
                  f"zeroed (the ablation moves the states by {moved:.2e})", ok=got <= TOLERANCE and moved > TOLERANCE))
        reused = _Record((), hidden_only=True)
        run_ablations(model, adapter, probe, [[(layer, head)]], lambda: reused)  # (one set: one reducer)
        add(_line("prefix reuse", float((torch.cat(reused.last) - want).abs().max()),
                  f"head {layer}.{head} ablated from layer {layer}'s cached input vs its attention output zeroed"))
