"""The online transition detector over live screens (pure Python, no torch).

Each screen gives an :class:`Observation`: the flagged-head counts of the watched
classes and the probe's induction loss. Compared with the previous screen, a
*trigger* (a transition is under way) is

- a count jump: ``|k_c(t) - k_c(t-1)| >= min_jump`` heads for a watched class c, and
  larger than every change *the other way* among the ``window`` screen-to-screen
  changes before it. That is the class's flicker: heads near a threshold that read on
  at one screen and off at the next (the toy's BOS heads do) move the count both
  ways, a forming circuit moves it one way, so a flat or steadily rising count
  triggers on every change of ``min_jump`` heads and a flickering one only on a jump
  past its flicker;
- a loss fall: ``L(t-1) - L(t) >= loss_drop`` nats, and larger than every rise of the
  loss in the same window (the induction loss falls steeply while an induction circuit
  forms, often before the heads cross the threshold; ``null``: off).

The window is the detector's whole state (:meth:`JumpDetector.state_dict`), so a
resumed training restores it exactly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence


@dataclass
class Observation:
    step: int
    counts: Dict[str, float]
    loss: Optional[float] = None


@dataclass
class JumpDetector:
    classes: Sequence[str]
    min_jump: int = 1
    window: int = 4
    loss_drop: Optional[float] = 0.5
    #: The last ``window + 1`` observations, oldest first.
    history: List[Observation] = field(default_factory=list)

    def update(self, obs: Observation) -> Optional[str]:
        """Add ``obs``; the reason when it triggers (``count.induction 0 -> 2``), else None."""
        past = self.history
        reason = None
        if past:
            prev = past[-1]
            for c in self.classes:
                if c not in obs.counts or c not in prev.counts:
                    continue
                jump = obs.counts[c] - prev.counts[c]
                flicker = _largest_change([o.counts.get(c) for o in past], -1.0 if jump > 0 else 1.0)
                if abs(jump) >= self.min_jump and abs(jump) > flicker:
                    reason = f"count.{c} {prev.counts[c]:.0f} -> {obs.counts[c]:.0f}"
                    break
            if reason is None and self.loss_drop is not None and obs.loss is not None and prev.loss is not None:
                fall = prev.loss - obs.loss
                if fall >= self.loss_drop and fall > _largest_change([o.loss for o in past], 1.0):
                    reason = f"induction_loss {prev.loss:.3f} -> {obs.loss:.3f}"
        self.history = (past + [obs])[-(self.window + 1):]
        return reason

    def state_dict(self) -> dict:
        return {"history": [asdict(o) for o in self.history]}

    def load_state_dict(self, state: dict) -> None:
        self.history = [Observation(**d) for d in state.get("history", [])]


def _largest_change(values: List[Optional[float]], sign: float) -> float:
    """The largest change in the direction ``sign`` (+1 up, -1 down) between consecutive
    known values, as a positive number (0 when there is none)."""
    known = [v for v in values if v is not None]
    return max((sign * (b - a) for a, b in zip(known, known[1:])), default=0.0)
