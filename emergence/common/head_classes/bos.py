"""``bos``: a head that attends to the first token (key 0), the attention sink.

T(q) = key 0, for q >= 1. Key 0 is this class's target, so it is not left out
(``excludes_key0=False``); the baseline is every other visible key.
"""

from emergence.common.head_classes import HeadClass


def targets(input_ids, settings):
    import torch

    T = input_ids.shape[1]
    mask = torch.zeros(1, T, T, dtype=torch.bool, device=input_ids.device)
    mask[:, :, 0] = True
    return mask


HEAD_CLASS = HeadClass(name="bos", threshold=30.0, excludes_key0=False, targets=targets,
                       description="0 (q >= 1)", order=40)
