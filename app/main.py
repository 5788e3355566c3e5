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

from app import pages, ui  # noqa: E402

#: The tab's icon. An emoji: Streamlit draws it as an inline ``data:`` SVG. A ``:material/...:``
#: icon here would be fetched from a font server on every page load (a request off the machine:
#: it fails on an air-gapped cluster and tells a third party who opened the dashboard); the menu's
#: Material icons come from the font Streamlit ships, so they stay.
PAGE_ICON = "📈"

st.set_page_config(page_title="gspo-dash", page_icon=PAGE_ICON, layout="wide")


def _navigation() -> dict[str, list[st.Page]]:
    """``app.pages.PAGES`` as ``st.Page`` objects by menu section; the home page also at the
    root, under a hidden entry (its menu entry keeps its own URL)."""
    home = pages.HOME
    menu = {
        section: [st.Page(p.script, title=p.title, icon=p.icon, url_path=p.url_path) for p in ps]
        for section, ps in pages.sections().items()
    }
    root = st.Page(
        home.script,
        title=home.title,
        url_path=pages.HOME_URL_PATH,
        default=True,
        visibility="hidden",
    )
    menu[home.section].insert(0, root)
    return menu


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

page = st.navigation(_navigation())
ctx = ui.sidebar()
if _login_required():
    st.sidebar.button("Log out", on_click=st.logout, key="logout")
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
