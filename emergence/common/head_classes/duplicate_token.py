"""``duplicate_token``: a head that attends from a token to its earlier copies.

T(q) = every earlier copy j >= 1 of token q (key 0 left out); queries without an
earlier copy are left out. On the synthetic probe ``[first] a1..an a1..an`` the query
n+i attends to key i.
"""

from emergence.common.head_classes import HeadClass


def earlier_copies(input_ids, settings=None):
    """Boolean [B, T, T]: ``mask[b, q, j]`` when j in 1..q-1 holds the same token as q (the targets)."""
    import torch

    T = input_ids.shape[1]
    earlier = torch.ones(T, T, dtype=torch.bool, device=input_ids.device).tril(-1)
    earlier[:, 0] = False
    return (input_ids[:, :, None] == input_ids[:, None, :]) & earlier


HEAD_CLASS = HeadClass(name="duplicate_token", threshold=30.0, excludes_key0=True, targets=earlier_copies,
                       description="each earlier copy j >= 1 of token q", order=30)
