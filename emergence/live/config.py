"""The ``live`` config group (``conf/live/``): live screening while a model trains.

Torch-free (the schema in emergence/config.py imports it at composition). The fields
and what they decide:

- ``mode``: an entry of :data:`MODES`: ``off`` (default; no monitor, the toy keeps its
  fixed 65-checkpoint schedule) or ``adaptive`` (screen while training, save where the
  counts change; emergence/live/schedule.py);
- the probe of a live screen: the job's ``corpus`` with ``n_sequences`` sequences (the
  probe's size, so a screen stays well under a second on the toy) and the job's
  ``screen`` with ``participation_ratio`` (off by default: the detector needs the counts
  and the induction loss only);
- the watch grid (``first_step``, ``screens_per_decade``), the sparse saves
  (``saves_per_decade``) and the dense window (``dense_every``, ``settle``);
- the detector (``classes``, ``min_jump``, ``window``, ``loss_drop``; emergence/live/detector.py)
  and ``lookback``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from emergence.contract import head_classes

#: ``live.mode`` -> what it does (the schedule classes live in emergence/live/schedule.py).
MODES = {
    "off": "no live screening; a toy keeps its fixed checkpoint schedule",
    "adaptive": "screen while training; save densely while a transition is under way, sparsely otherwise",
}


@dataclass
class LiveConfig:
    #: ``off`` (default) or ``adaptive`` (:data:`MODES`).
    mode: str = field(default="off", metadata={"choices": tuple(MODES)})
    #: Probe sequences of a live screen (the job's ``corpus`` otherwise): its size sets the cost.
    n_sequences: int = field(default=64, metadata={"min": 1})
    #: Participation ratio in live screens (the detector does not need it).
    participation_ratio: bool = False
    #: Head classes whose counts the detector watches.
    classes: List[str] = field(default_factory=lambda: ["induction", "bos"],
                               metadata={"items": {"choices": head_classes.names}})
    #: Watch screens: at step 0 and on the log grid ``round(first_step * 10**(i / screens_per_decade))``.
    first_step: int = field(default=50, metadata={"min": 1})
    screens_per_decade: float = field(default=40.0, metadata={"gt": 0, "max": 1000, "finite": True})
    #: Sparse saves: the first screen at or after each point of a log grid this dense (from first_step).
    saves_per_decade: float = field(default=4.0, metadata={"gt": 0, "max": 1000, "finite": True})
    #: During a transition: screen and save every this many steps (the watch grid where it is finer).
    dense_every: int = field(default=25, metadata={"min": 1})
    #: A transition ends after this many dense screens without a trigger.
    settle: int = field(default=2, metadata={"min": 1})
    #: A watched count that moves by at least this many heads between screens (and by more than its
    #: flicker over the last ``window`` screens) starts a transition.
    min_jump: int = field(default=1, metadata={"min": 1})
    window: int = field(default=4, metadata={"min": 0})
    #: ... so does an induction-loss fall of at least this many nats between screens that is also
    #: larger than its fluctuation over the last ``window`` screens (null: counts only).
    loss_drop: Optional[float] = field(default=0.5, metadata={"gt": 0, "finite": True})
    #: Keep a CPU copy of the last screened weights, so a jump found at one screen also saves the
    #: screen before it (the jump is then bracketed by two saved checkpoints one watch step apart).
    lookback: bool = True
