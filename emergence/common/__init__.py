"""What both apps share, torch-free: the run contract and the layer under both apps.

``emergence`` (screening) and ``stats`` (statistics) both import this package; it imports
neither (no model code, no torch), and ``stats`` imports nothing else of ``emergence``
(``tests/test_architecture.py`` walks the imports). One concept per module: the run contract
(:mod:`~emergence.common.contract`), the head classes, the MLflow store and its checks, the
schema checks of a config, the plug-in registry, the output home, the token formatter and axis,
progress lines and log levels (docs/architecture.md lists them).

On import, usage reports to outside hosts are turned off by default (:func:`telemetry_off_by_default`).
"""

#: Environment variables that keep the libraries from reporting usage to outside hosts: MLflow 3
#: (``MLFLOW_DISABLE_TELEMETRY``; it also honours ``DO_NOT_TRACK=true``) and the Hugging Face hub
#: client (``HF_HUB_DISABLE_TELEMETRY``). A value already in the environment wins, so
#: ``MLFLOW_DISABLE_TELEMETRY=false`` turns MLflow's telemetry back on.
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


telemetry_off_by_default()
