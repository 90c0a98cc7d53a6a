"""``self``: a head that attends from each token to itself.

T(q) = q, for q >= 1 (the query 0 would target key 0, which is left out; at q = 1 the
baseline is empty, so in practice q >= 2 counts).
"""

from emergence.common.head_classes import HeadClass


def targets(input_ids, settings):
    import torch

    T = input_ids.shape[1]
    return torch.eye(T, dtype=torch.bool, device=input_ids.device)[None]


HEAD_CLASS = HeadClass(name="self", threshold=30.0, excludes_key0=True, targets=targets,
                       description="q (q >= 1)", order=50)
