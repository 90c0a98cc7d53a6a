"""The toy suite's training recipe: one typed config node, composed from ``conf/recipe/``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class ToyCorpusConfig:
    """Synthetic training text: Zipf-like bigram text, first token fixed at position 0,
    and random segments repeated at random offsets (see ``emergence.toy.corpus``)."""

    vocab_size: int = 128
    first_token: int = 0
    zipf_exponent: float = 1.1
    #: Fraction of sequences that carry one repeated segment.
    repeat_fraction: float = 1.0
    #: Segment lengths, uniform in [segment_min, segment_max] (the probe's n = 31 is the maximum).
    segment_min: int = 12
    segment_max: int = 31


@dataclass
class ToyRecipeConfig:
    family: str = "gpt_neox"
    n_layers: int = 4
    n_heads: int = 4
    d_model: int = 64
    d_ff: int = 256
    #: OLMoE only: experts and experts per token.
    n_experts: int = 4
    top_k: int = 2
    #: OLMoE only: weight of the router's load-balancing loss.
    router_aux_loss_coef: float = 0.01
    #: OLMo / OLMoE: clamp q, k, v to [-clip_qkv, clip_qkv] (``null``: no clamp).
    clip_qkv: Optional[float] = None
    #: Std of the normal weight initialisation (HF ``initializer_range``).
    init_std: float = 0.05
    #: Rotary base (HF ``rope_parameters.rope_theta``); rotary covers the full head in every family.
    rope_theta: float = 500.0
    #: Biases on the q, k, v and output projections (HF ``attention_bias``; OLMo / OLMoE only:
    #: GPT-NeoX always has them, OLMo-1B and OLMoE-1B-7B have none).
    attention_bias: bool = False
    seq_len: int = 64
    batch_size: int = 32
    steps: int = 2000
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup_steps: int = 100
    #: ``constant`` (after warm-up) or ``cosine`` (decay to ``min_lr_ratio * lr`` at ``steps``).
    lr_schedule: str = "constant"
    min_lr_ratio: float = 0.1
    #: AdamW betas.
    beta1: float = 0.9
    beta2: float = 0.95
    #: Clip the global gradient norm (``null``: no clipping).
    grad_clip: Optional[float] = 1.0
    #: The run's seed: the training data (the corpus's bigram table and every batch) and the
    #: initial weights both come from it, unless ``data_seed`` / ``init_seed`` set one of them
    #: apart (null: ``seed``), so that ``-m model.recipe.seed=0,1,2 model.recipe.init_seed=0``
    #: varies the data order alone and ``... model.recipe.data_seed=0`` the initialisation alone.
    #: Null ones are left out of the recipe's hash: a recipe without them keeps its cached suite.
    seed: int = 0
    data_seed: Optional[int] = None
    init_seed: Optional[int] = None
    #: Checkpoints at log-spaced steps from ``first_checkpoint`` to ``steps`` (plus step 0). The
    #: suite's 64 leave room to refine (``revision=refine``): the default job screens 10 of them
    #: (every 7th: 63 = 7 x 9 intervals, so they are exactly the 10 log-spaced steps).
    n_checkpoints: int = 64
    first_checkpoint: int = 200
    corpus: ToyCorpusConfig = field(default_factory=ToyCorpusConfig)
    #: Torch intra-op threads for training (``null``: torch's default). Part of the recipe's
    #: identity: another thread count changes the weights in the last bits.
    threads: Optional[int] = None


def data_seed(recipe) -> int:
    """The seed of the training data: ``recipe.data_seed``, else ``recipe.seed``."""
    value = getattr(recipe, "data_seed", None)
    return int(recipe.seed if value is None else value)


def init_seed(recipe) -> int:
    """The seed of the initial weights: ``recipe.init_seed``, else ``recipe.seed``."""
    value = getattr(recipe, "init_seed", None)
    return int(recipe.seed if value is None else value)


#: The cost model of a toy's training on 2 quiet CPU cores (a dry run's estimate): a fixed cost per
#: optimizer update (Python, the optimizer over every tensor, the data) and a rate of training
#: FLOPs; fitted to trainings measured on the 2-core machine (docs/toy-suite.md).
STEP_OVERHEAD_S = 0.012
TRAINING_FLOPS_PER_S = 8e10


def estimated_training_seconds(recipe, from_step: int = 0) -> float:
    """About how long training ``recipe`` from ``from_step`` takes on 2 quiet CPU cores. FLOPs of one
    update: 6 per weight per token (forward and backward) over the active weights, and the attention
    scores and mix (3 x forward: 4 x seq x d per token and layer)."""
    d, ff, layers = int(recipe.d_model), int(recipe.d_ff), int(recipe.n_layers)
    experts = int(recipe.top_k) if recipe.family == "olmoe" else 1
    ff_matrices = 2 if recipe.family == "gpt_neox" else 3  # per expert: GPT-NeoX's MLP 2, SwiGLU 3
    weights = layers * (4 * d * d + ff_matrices * d * ff * experts) + 2 * int(recipe.corpus.vocab_size) * d
    tokens = int(recipe.batch_size) * int(recipe.seq_len)
    flops = tokens * (6.0 * weights + 3.0 * layers * 4 * int(recipe.seq_len) * d)
    steps = max(0, int(recipe.steps) - int(from_step))
    return steps * (STEP_OVERHEAD_S + flops / TRAINING_FLOPS_PER_S)
