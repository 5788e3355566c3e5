"""gspo-dash's Streamlit dashboard: ``streamlit run app/main.py [-- --root DIR --tracking-uri URI]``.

Modules, each one job (imports point down this list; ``training_hooks.schema`` and
``training_hooks.metric_map``, both torch-free, are read by all):

- ``records``: the typed records crossing module boundaries (``RunRef``, ``Table``, ``Discovery``).
- ``settings``: the root, tracking URI and read-only mode from the CLI, the environment or defaults;
  the rules for paths typed in the browser. ``cli``: the ``gspo-dash`` console script.
- ``mlflow_store``: everything read from an MLflow store (its runs; curves of MLflow-only runs),
  and which stores may be opened (never created or migrated; typed URIs checked).
- ``data``: a run's tables (Parquet parts, cached on their size and mtime; steps, sequences,
  tokens), dispatching MLflow-only runs' step tables to ``mlflow_store``.
- ``discovery``: which runs there are (run folders under the root plus MLflow-only runs).
- ``colors`` (a colour per run), ``eps_format`` (ε as text), ``line_style`` (dash by algorithm):
  pure helpers of the charts.
- ``aggregate``, ``charts``, ``health``: pure DataFrame -> reductions / ``go.Figure`` (the
  single-run pages' figures) / findings.
- ``compare``: the Compare page as one package (its panels, traces, ECharts grid, grouped view
  and caches); ``verdict`` (``python -m app.verdict``), ``run_groups``, ``verdict_stats``: runs
  grouped over seeds and scored, for the shell and for Compare.
- ``ui``: the sidebar and the widgets the pages share; ``app_pages/``: one script per page;
  ``pages``: the list of pages (plain data, read by the tests); ``main``: routing only.

Nothing here imports torch (a test checks).
"""
