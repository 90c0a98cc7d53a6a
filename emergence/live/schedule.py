"""When to screen and when to save, step by step (pure Python, no torch).

Steps are training steps (optimizer updates done). Three grids:

- **watch**: step 0, then ``w_i = round(first_step * 10**(i / screens_per_decade))``,
  i = 0, 1, ... (log-spaced: ``1 / screens_per_decade`` decades apart);
- **sparse saves**: the same with ``saves_per_decade``; a screen *saves sparsely* when a
  point of this grid lies after the last save and at or before it (the first screen,
  step 0, always saves);
- **dense**: during a transition, screens ``dense_every`` steps apart (the watch grid's
  steps where that grid is finer, early in training), every one saved.

:class:`AdaptiveSchedule` reads each screen's :class:`~emergence.live.detector.Observation`
and returns a :class:`Decision`: a trigger of the detector (emergence/live/detector.py)
saves this screen, asks for the previous screen to be saved too (``lookback``: the jump
happened between them), and opens the dense window; the window closes after ``settle``
dense screens without a trigger. A failed screen (``None``) detects nothing; the sparse
saves go on, and the next screen is tried at the next sparse save (not at every watch
step), where a success resumes the watch grid.

The schedule's whole state is :meth:`AdaptiveSchedule.state_dict` (JSON), so a resumed
training makes the same decisions as an uninterrupted one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from emergence.live.detector import JumpDetector, Observation


def log_grid_next(step: int, first: int, per_decade: float) -> int:
    """The smallest point > ``step`` of the grid ``round(first * 10**(i / per_decade))``, i >= 0."""
    if step < first:
        return int(first)
    i = max(0, math.floor(per_decade * math.log10(step / first)) - 1)
    while True:
        point = int(round(first * 10 ** (i / per_decade)))
        if point > step:
            return point
        i += 1


@dataclass
class Decision:
    #: Save a checkpoint of this step.
    save: bool
    #: Save the previous screen's weights too (the lookback copy): a jump happened since it.
    save_previous: bool = False
    #: Why: ``first screen``, ``sparse``, ``dense``, ``trigger: <detector reason>``, ``screen failed``.
    reason: str = ""


class AdaptiveSchedule:
    """``live=adaptive``: sparse log-spaced saves, dense saves while a transition is under way."""

    def __init__(self, live_cfg):
        self.cfg = live_cfg
        self.detector = JumpDetector(list(live_cfg.classes), int(live_cfg.min_jump), int(live_cfg.window),
                                     None if live_cfg.loss_drop is None else float(live_cfg.loss_drop))
        self.next_screen = 0
        self.last_saved: Optional[int] = None
        self.last_screened: Optional[int] = None
        self.dense = False
        self.quiet = 0
        self.failing = False

    # -- grids
    def _grid_after(self, step: int, per_decade) -> int:
        return log_grid_next(step, int(self.cfg.first_step), float(per_decade))

    def sparse_due(self, step: int) -> bool:
        return self.last_saved is None or self._grid_after(self.last_saved, self.cfg.saves_per_decade) <= step

    def due(self, step: int) -> bool:
        return step >= self.next_screen

    # -- one screen
    def observe(self, step: int, obs: Optional[Observation]) -> Decision:
        """The decision at a screen of ``step`` (``obs`` None: the screen failed)."""
        if obs is None:
            decision = Decision(self.sparse_due(step), reason="screen failed")
            self.failing = True
        else:
            self.failing = False
            trigger = self.detector.update(obs)
            if trigger is not None:
                previous_unsaved = self.last_screened is not None and self.last_screened != self.last_saved
                decision = Decision(True, bool(self.cfg.lookback) and previous_unsaved and not self.dense,
                                    f"trigger: {trigger}")
                self.dense, self.quiet = True, 0
            elif self.dense:
                self.quiet += 1
                self.dense = self.quiet < int(self.cfg.settle)
                decision = Decision(True, reason="dense")
            elif self.sparse_due(step):
                decision = Decision(True, reason="first screen" if self.last_saved is None else "sparse")
            else:
                decision = Decision(False)
        self.last_screened = step
        if decision.save:
            self.last_saved = step
        self.next_screen = self._next_screen(step)
        return decision

    def _next_screen(self, step: int) -> int:
        if self.failing:  # retried at the next save
            return self._grid_after(max(step, self.last_saved or 0), self.cfg.saves_per_decade)
        watch = self._grid_after(step, self.cfg.screens_per_decade)
        if not self.dense:
            return watch
        # dense: every dense_every steps, but where the watch grid is finer than that, the watch grid
        spacing = step * (10 ** (1 / float(self.cfg.screens_per_decade)) - 1)
        return watch if spacing <= int(self.cfg.dense_every) else step + int(self.cfg.dense_every)

    # -- resumption
    _STATE = ("next_screen", "last_saved", "last_screened", "dense", "quiet", "failing")

    def state_dict(self) -> dict:
        return {**{key: getattr(self, key) for key in self._STATE}, "detector": self.detector.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        for key in self._STATE:
            setattr(self, key, state[key])
        self.detector.load_state_dict(state["detector"])


#: ``live.mode`` -> the schedule class (None: no monitor).
SCHEDULES = {"off": None, "adaptive": AdaptiveSchedule}
