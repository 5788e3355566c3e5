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
- ``colors`` (a colour per run), ``series_math`` (downsampling, EMA, envelopes, readout points),
  ``eps_format`` (ε as text), ``line_style`` (dash by algorithm): pure helpers of the charts.
- ``panels`` (Compare's panel registry), ``compare_traces`` (Compare's traces as plain records),
  ``echarts_grid`` (those records -> one ECharts option).
- ``aggregate``, ``charts``, ``health``: pure DataFrame -> reductions / ``go.Figure`` (the
  single-run pages' figures) / findings; ``plotly_traces``: Compare's records -> ``go.Figure``.
- ``traces``: the Compare page's per-run trace cache (``compare_traces.run_traces`` behind the cache).
- ``ui``: the sidebar and the widgets the pages share; ``app_pages/``: one script per page;
  ``main``: routing only. ``launch``: serve the app and open it in Chromium (tests, benchmark).

Nothing here imports torch (a test checks).
"""
