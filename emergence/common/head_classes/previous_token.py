"""``previous_token``: a head that attends from each token to the one before it.

T(q) = q-1, for q >= 2 (the query q = 1 would target key 0, which is left out).
"""

from emergence.common.head_classes import HeadClass


def targets(input_ids, settings):
    import torch

    T = input_ids.shape[1]
    return torch.ones(T, T, dtype=torch.bool, device=input_ids.device).tril(-1).triu(-1)[None]  # k = q-1


HEAD_CLASS = HeadClass(name="previous_token", threshold=30.0, excludes_key0=True, targets=targets,
                       description="q-1 (q >= 2)", order=20)
