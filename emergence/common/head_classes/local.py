"""``local``: a head that spreads its attention over the few tokens before the previous one.

T(q) = q-w .. q-2 for the queries q >= w, key 0 left out; w is ``screen.local_window``
(default :data:`DEFAULT_WINDOW`; at least :data:`MIN_WINDOW`, the schema's bound: emergence/config.py).
The previous token q-1 is the ``previous_token`` class's.
"""

from emergence.common.head_classes import HeadClass

#: The window w when the screen does not set ``local_window``.
DEFAULT_WINDOW = 4
#: The smallest window: q-w .. q-2 holds one key at w = 2.
MIN_WINDOW = 2


def targets(input_ids, settings):
    import torch

    w = int(settings.get("local_window", DEFAULT_WINDOW))
    if w < MIN_WINDOW:
        raise ValueError(f"screen.local_window must be >= {MIN_WINDOW} (got {w})")
    T = input_ids.shape[1]
    q = torch.arange(T, device=input_ids.device)[:, None]
    k = torch.arange(T, device=input_ids.device)[None, :]
    return ((k >= q - w) & (k <= q - 2) & (q >= w))[None]


HEAD_CLASS = HeadClass(name="local", threshold=10.0, excludes_key0=True, targets=targets,
                       description="q-w .. q-2, key 0 left out (q >= w)", order=60)
