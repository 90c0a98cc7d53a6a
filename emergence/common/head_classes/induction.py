"""``induction``: a head that attends from a token to the token after its earlier copy.

T(q) = j+1 for each earlier copy j >= 1 of token q (key 0 left out); queries without
an earlier copy are left out. On the synthetic probe the query n+i attends to key i+1,
the token that followed the first occurrence: the copy that predicts the next token.
"""

from emergence.common.head_classes import HeadClass
from emergence.common.head_classes.duplicate_token import earlier_copies


def targets(input_ids, settings):
    import torch

    duplicate = earlier_copies(input_ids)
    induction = torch.zeros_like(duplicate)
    induction[:, :, 1:] = duplicate[:, :, :-1]
    return induction


HEAD_CLASS = HeadClass(name="induction", threshold=50.0, excludes_key0=True, targets=targets,
                       description="j+1 for each earlier copy j >= 1 of token q", order=10)
