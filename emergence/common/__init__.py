"""What both apps share, torch-free: the run contract and the layer under both apps.

``emergence`` (screening) and ``stats`` (statistics) both import this package; it imports
neither (no model code, no torch), and ``stats`` imports nothing else of ``emergence``
(``tests/test_architecture.py`` walks the imports). Its modules, one concept each:

- :mod:`emergence.common.contract`: the **run contract**, the names of what a screen run
  writes and ``stats`` reads (tags, params, metrics, the ``heads.csv`` columns, the run
  identity, the run seed);
- :mod:`emergence.common.head_classes`: the head classes (name, threshold, targets);
- :mod:`emergence.common.store`: the MLflow store (layout, lock, migration, retry,
  relocation, dead runs, one whole run): both apps write MLflow through it;
  ``python -m emergence.common relocate`` points a moved store at its new folder;
- :mod:`emergence.common.storecheck`: a tracking URI checked before any work;
- :mod:`emergence.common.mlflow_ui`: the experiment tags the MLflow UI reads;
- :mod:`emergence.common.checks`: the schema checks of a config (constraints next to the
  fields, one-line errors, the command-line precheck), for both apps' schemas;
- :mod:`emergence.common.plugins`: the one ``Registry`` of plug-in tables;
- :mod:`emergence.common.telemetry`: no usage reports to outside hosts by default (set here,
  on import of any part of the package);
- :mod:`emergence.common.paths`: where both apps write (``$EMERGENCE_HOME`` or the cwd);
- :mod:`emergence.common.units` and :mod:`emergence.common.tokenaxis`: token counts as people
  write them (``23B``) and token axes;
- :mod:`emergence.common.progress` and :mod:`emergence.common.quiet`: stage lines and bars,
  and the libraries' log levels.
"""

from emergence.common.telemetry import telemetry_off_by_default

telemetry_off_by_default()
