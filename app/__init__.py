"""gspo-dash's Streamlit dashboard: ``streamlit run app/main.py [-- --root DIR --tracking-uri URI]``.

Modules: ``cols`` (the on-disk schema, re-exported), ``training_hooks.metric_map`` (foreign metric names
-> our columns), ``data`` (the one cached data layer), ``charts`` (pure DataFrame -> Figure),
``health`` (pure findings), ``ui`` (shared sidebar/selection widgets), ``app_pages/`` (one module
per page). Nothing here imports torch.
"""
