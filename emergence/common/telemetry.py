"""No usage reports to outside hosts by default (MLflow 3, the Hugging Face hub client).

Every process that reads or writes runs imports :mod:`emergence.common` (the package), which calls
:func:`telemetry_off_by_default` at import, before MLflow is imported.
"""

#: Environment variables that keep the libraries from reporting usage to outside hosts: MLflow 3
#: (``MLFLOW_DISABLE_TELEMETRY``; it also honours ``DO_NOT_TRACK=true``) and the Hugging Face hub
#: client (``HF_HUB_DISABLE_TELEMETRY``). Set when unset, before MLflow is imported, by every
#: module that reads or writes runs (they all import this one); a value already in the
#: environment wins, so ``MLFLOW_DISABLE_TELEMETRY=false`` turns MLflow's telemetry back on.
TELEMETRY_OFF = {"MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_DISABLE_TELEMETRY": "1"}


def telemetry_off_by_default() -> None:
    """Apply :data:`TELEMETRY_OFF` where the environment does not say otherwise; when MLflow was
    imported before (its telemetry client is made at import), make its client again."""
    import os
    import sys

    changed = False
    for name, value in TELEMETRY_OFF.items():
        if name not in os.environ:
            os.environ[name] = value
            changed = True
    if changed and "mlflow.telemetry.client" in sys.modules:
        sys.modules["mlflow.telemetry.client"].set_telemetry_client()  # None once disabled


