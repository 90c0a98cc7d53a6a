"""What the sweeper learnt about the last sweep in this process (the launcher's process).

Jobs may run in other processes (joblib, submitit); their ``JobReturn`` objects come
back to the launcher, and the sweeper keeps them here for the summary callback
(``emergence.callbacks``) and for the exit status of ``python -m emergence``.
"""

from __future__ import annotations

from typing import Any, List

#: Every job's ``hydra.core.utils.JobReturn``, in job order.
RETURNS: List[Any] = []
#: One line per failed job: ``#<job> (<overrides>): <error>``.
FAILED: List[str] = []
#: How many jobs the sweep launched (0: no sweep ran in this process).
N_JOBS: int = 0


def reset() -> None:
    global N_JOBS
    RETURNS.clear()
    FAILED.clear()
    N_JOBS = 0
