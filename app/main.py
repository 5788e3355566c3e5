"""gspo-dash: ``streamlit run app/main.py [-- --root DIR --tracking-uri URI --read-only]``, or the
``gspo-dash`` console script (``app/cli.py``), which applies the same server settings from any folder.

Only routing lives here: the sidebar (root, MLflow store, run selection, refresh) is drawn by
``app.ui.sidebar`` and each page is its own module under ``app/app_pages/``.
"""

import sys
import traceback
from pathlib import Path

_REPO = str(Path(__file__).resolve().parents[1])
if _REPO not in sys.path:  # `streamlit run app/main.py` from a checkout that is not installed
    sys.path.insert(0, _REPO)

import streamlit as st  # noqa: E402

from app import ui  # noqa: E402

st.set_page_config(page_title="gspo-dash", page_icon=":material/monitoring:", layout="wide")

RUNS_SCRIPT = "app_pages/runs.py"
PAGES = {
    "Runs": [
        # the app's root shows the Runs page; the menu's Runs entry is /runs (a page served at the
        # root has no other URL, so /runs would otherwise be "Page not found")
        st.Page(RUNS_SCRIPT, title="Runs", url_path="home", default=True, visibility="hidden"),
        st.Page(RUNS_SCRIPT, title="Runs", icon=":material/table_rows:", url_path="runs"),
        st.Page(
            "app_pages/compare.py",
            title="Compare",
            icon=":material/stacked_line_chart:",
            url_path="compare",
        ),
        st.Page(
            "app_pages/health.py",
            title="Health",
            icon=":material/health_and_safety:",
            url_path="health",
        ),
    ],
    "Inside one run": [
        st.Page(
            "app_pages/ratios.py", title="Ratios", icon=":material/ssid_chart:", url_path="ratios"
        ),
        st.Page("app_pages/groups.py", title="Groups", icon=":material/groups:", url_path="groups"),
        st.Page(
            "app_pages/lengths.py",
            title="Lengths",
            icon=":material/straighten:",
            url_path="lengths",
        ),
        st.Page(
            "app_pages/sequences.py",
            title="Sequences",
            icon=":material/format_list_numbered:",
            url_path="sequences",
        ),
    ],
}


def _login_required() -> bool:
    """Streamlit's OIDC login is on when ``.streamlit/secrets.toml`` has an ``[auth]`` section
    (``st.login``; Streamlit needs Authlib for it): then every page waits for a login."""
    try:
        return "auth" in st.secrets
    except Exception:  # noqa: BLE001 - no secrets.toml: no login
        return False


if _login_required() and not st.user.get("is_logged_in"):
    st.title("gspo-dash")
    st.button("Log in", on_click=st.login, type="primary", key="login")
    st.stop()

page = st.navigation(PAGES)
ui.timing("start")
ctx = ui.sidebar()
if _login_required():
    st.sidebar.button("Log out", on_click=st.logout, key="logout")
ui.timing("sidebar")
try:
    page.run()
except Exception as e:  # last resort: a message, never a bare traceback page (st.stop/rerun pass)
    st.error(
        f"This page could not be drawn: {ui.md_escape(f'{type(e).__name__}: {e}')}. The data "
        "problems above (if any) name the run; other pages still work.",
        icon=":material/error:",
    )
    if not ctx.read_only:  # a team server shows no tracebacks (they name the server's paths)
        with st.expander("Technical details (for a bug report)"):
            st.code(traceback.format_exc(), language=None)
ui.timing("page")
