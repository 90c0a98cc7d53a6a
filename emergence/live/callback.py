"""Live screening in the HF ``Trainer``: :class:`LiveCallback`.

``on_step_end`` calls the monitor; when it decides a checkpoint it sets ``control.should_save``
and the ``Trainer`` writes ``<output_dir>/checkpoint-<N>/`` as usual. ``on_save`` lists every
checkpoint the ``Trainer`` writes (the monitor's and its own) in ``<output_dir>/revisions.json``,
screened once, and stores the monitor's state in it (``live_state.json``), so
``trainer.train(resume_from_checkpoint=True)`` resumes with it. The lookback copy is written by
the monitor itself as ``checkpoint-<M>/`` (weights and config only); the last step is always
saved. The example: docs/live.md (run as written by tests/emergence/test_live_trainer.py).

Tokens: ``state.num_input_tokens_seen`` when the arguments count them
(``include_num_input_tokens_seen``), else ``global_step x model.tokens.tokens_per_step``;
without either the callback refuses to start. Keep ``save_total_limit`` unset: rotated
checkpoints would leave the listing.
"""

from __future__ import annotations

import json
from pathlib import Path

from transformers import TrainerCallback

from emergence import EmergenceError
from emergence.live.checkpoints import CheckpointFolder, write_json_atomic
from emergence.live.monitor import LiveMonitor

STATE_FILE = "live_state.json"


def _counts_tokens(args) -> bool:
    return getattr(args, "include_num_input_tokens_seen", "no") not in (False, None, "no")


class LiveCallback(TrainerCallback):
    """Screens the model as the ``Trainer`` trains it and asks for the checkpoints the monitor wants."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.monitor = None

    def _tokens(self, args, state) -> int:
        if _counts_tokens(args):
            return int(state.num_input_tokens_seen)
        return int(state.global_step) * int(self.cfg.model.tokens.tokens_per_step)

    def on_train_begin(self, args, state, control, **kwargs):
        if not _counts_tokens(args) and not self.cfg.model.tokens.tokens_per_step:
            raise EmergenceError("LiveCallback needs the tokens seen: set TrainingArguments("
                                 "include_num_input_tokens_seen=True) or model.tokens.tokens_per_step")
        if args.save_total_limit:
            raise EmergenceError(f"LiveCallback: save_total_limit={args.save_total_limit} would delete listed "
                                 "checkpoints; leave it unset")
        folder = Path(args.output_dir).resolve()
        self.cfg.model.path = str(folder)
        folder.mkdir(parents=True, exist_ok=True)
        checkpoints = CheckpointFolder(folder, name_format="checkpoint-{step}", writes_current=False)
        self.monitor = LiveMonitor(self.cfg, checkpoints, tokenizer=kwargs.get("processing_class"))
        resumed = folder / f"checkpoint-{state.global_step}" / STATE_FILE
        if state.global_step > 0 and resumed.is_file():
            self.monitor.load_state_dict(json.loads(resumed.read_text()), state.global_step, delete_later=False)
        elif state.global_step == 0 and self.monitor.step(kwargs["model"], 0, 0):  # the initial weights
            self.monitor.saved(kwargs["model"], 0, 0, write=True)

    def on_step_end(self, args, state, control, **kwargs):
        final = state.max_steps > 0 and state.global_step >= state.max_steps
        if self.monitor.step(kwargs["model"], state.global_step, self._tokens(args, state), final=final):
            control.should_save = True
        return control

    def on_save(self, args, state, control, **kwargs):
        step, tokens = state.global_step, self._tokens(args, state)
        self.monitor.saved(kwargs["model"], step, tokens)
        folder = Path(args.output_dir) / f"checkpoint-{step}"
        if folder.is_dir():
            write_json_atomic(folder / STATE_FILE, self.monitor.state_dict())
        return control

    def on_train_end(self, args, state, control, **kwargs):
        """Training ended (``max_steps``, or stopped early by a callback): the last step saved (by the
        monitor itself when the ``Trainer`` did not), what is pending logged, the listing complete."""
        if self.monitor is None:
            return control
        step = state.global_step
        if step not in self.monitor.checkpoints.steps() and kwargs.get("model") is not None:
            self.monitor.saved(kwargs["model"], step, self._tokens(args, state), write=True)
        self.monitor.finish()
        return control
