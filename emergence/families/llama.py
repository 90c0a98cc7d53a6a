"""Llama-style decoders: HF model types ``llama``, ``mistral`` and ``qwen2``.

Grouped-query attention is fine: the weights come per query head and ``o_proj`` takes
``num_attention_heads x head_dim`` inputs. ``auto`` is bfloat16 on a GPU. The toy suite does
not train this family (no toy builder); a model of it is one YAML file
(conf/model/_llama_style.yaml, docs/families_and_sources.md).
"""

from emergence.families import Family

FAMILY = Family(
    name="llama",
    model_types=("llama", "mistral", "qwen2"),
    description="Llama, Mistral, Qwen2 (Llama-style decoders)",
)
