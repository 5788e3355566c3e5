"""The dashboard's pages, declared once: ``app/main.py`` builds its navigation from ``PAGES``, and
the page, security and fuzz tests open every page listed here (a page left out of this list is
left out of the app, so it cannot escape the tests).

Plain data, no Streamlit: importable anywhere (tests, ``app.cli``) without starting an app.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: ``app/main.py``, the script ``streamlit run`` (and ``gspo-dash``, and the tests) start.
MAIN = str(Path(__file__).resolve().with_name("main.py"))
#: The folder of the page scripts (``st.Page`` paths are relative to ``app/``).
PAGES_DIR = "app_pages"


@dataclass(frozen=True)
class PageSpec:
    """One page of the dashboard: an ``st.Page`` under a section of the sidebar's menu."""

    script: str
    """The page's script, relative to ``app/`` (``app_pages/<name>.py``)."""
    title: str
    """The menu entry and the browser tab's title."""
    icon: str
    """A Material icon (``:material/<name>:``)."""
    url_path: str
    """The page's URL below the app's root (``/compare``); also the name tests call it by."""
    section: str
    """The menu section it sits in."""


def _page(name: str, title: str, icon: str, section: str) -> PageSpec:
    return PageSpec(f"{PAGES_DIR}/{name}.py", title, f":material/{icon}:", name, section)


#: Every page, in menu order. The first is also served at the app's root (``main.py``).
PAGES: tuple[PageSpec, ...] = (
    _page("runs", "Runs", "table_rows", "Runs"),
    _page("compare", "Compare", "stacked_line_chart", "Runs"),
    _page("health", "Health", "health_and_safety", "Runs"),
    _page("ratios", "Ratios", "ssid_chart", "Inside one run"),
    _page("groups", "Groups", "groups", "Inside one run"),
    _page("lengths", "Lengths", "straighten", "Inside one run"),
    _page("sequences", "Sequences", "format_list_numbered", "Inside one run"),
)
#: The page the app's root shows.
HOME = PAGES[0]
#: The root's own URL path: a hidden second ``st.Page`` of ``HOME`` (a page served at the root
#: has no other URL, so ``/runs`` would otherwise be "Page not found").
HOME_URL_PATH = "home"


def script(url_path: str) -> str:
    """The script of the page at ``url_path`` (KeyError naming the known pages otherwise)."""
    for page in PAGES:
        if page.url_path == url_path:
            return page.script
    raise KeyError(f"no page {url_path!r}; pages: {', '.join(p.url_path for p in PAGES)}")


def sections() -> dict[str, list[PageSpec]]:
    """``PAGES`` grouped by section, sections in the order they first appear."""
    out: dict[str, list[PageSpec]] = {}
    for page in PAGES:
        out.setdefault(page.section, []).append(page)
    return out
