"""BLOOM: HF model type ``bloom`` (BLOOM, BLOOMZ).

BLOOM adds ALiBi biases to its attention scores and has no SDPA path and no attention
interface: it is loaded with eager attention, whose module always returns its attention
probabilities as its second output; the screen reads its rows there (emergence/screens/
attention.py, ``eager_taps``), so they are exactly transformers' ``output_attentions``
(tests/emergence/test_families_auto.py checks it). Its decoder layers return ``(hidden_states, weights)``.
``pretraining_tp > 1`` with ``slow_but_exact`` bypasses ``dense`` (no released checkpoint sets it).
"""

from emergence.families import Family

FAMILY = Family(
    name="bloom",
    model_types=("bloom",),
    layers="transformer.h",
    attention="self_attention",
    projection="self_attention.dense",
    layer_returns_tuple=True,
    description="BLOOM (ALiBi, eager attention)",
)
