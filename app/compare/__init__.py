"""The Compare page as one package: every run's step metrics as small multiples, runs coloured,
the ratio the loss ran on as the line style, and runs grouped over seeds with a verdict.

- ``page``: the page itself (``render``; ``app/app_pages/compare.py`` is the script that calls it).
- ``panels``: the built-in panels, declared once (also the Lengths page's truncation chart).
- ``view``: what the page draws, decided from the runs' step tables (steps per panel by policy
  lag, extra metrics into groups, constants and counters, the log s zoom, stand-ins).
- ``traces``: a run's traces on a panel as plain records (``Trace``, ``Readout``, ``RunSeries``).
- ``series_math``: LTTB, the debiased EMA, envelopes, readout points, arrays for the browser.
- ``echarts_grid``: the records as one ECharts option (the grid, its hover readout, the legend);
  ``plotly_traces``: the same records as Plotly.
- ``grouping``, ``group_chart``: runs grouped over seeds (the control, the verdict table of
  ``app.verdict``, the grouped charts as one ECharts option).
- ``sources``: the foreign metric a chart's column was mapped from (the search finds it).
- ``cache``: one cache per run's step table and one per chart (Streamlit's own caches).

Pure (no Streamlit) but ``page``, ``grouping`` and ``cache``.
"""
