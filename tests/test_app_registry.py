"""The page registry (``app/pages.py``) is the one list of pages: every page script is in it, the
router builds its menu from it, links between pages name registered scripts, and the tests that
open "every page" (pages, security, fuzz) iterate over it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import test_security

from app import pages

APP = Path(pages.MAIN).parent
SCRIPT_LITERAL = re.compile(rf"[\"']({pages.PAGES_DIR}/[^/\"']+\.py)[\"']")


def test_every_page_script_is_registered():
    """Each ``app/app_pages/*.py`` (but ``__init__``) is a page of the registry, and each
    registered script exists: a new page cannot be left out of the menu or the tests."""
    on_disk = {
        f"{pages.PAGES_DIR}/{p.name}"
        for p in (APP / pages.PAGES_DIR).glob("*.py")
        if p.name != "__init__.py"
    }
    registered = [p.script for p in pages.PAGES]
    assert sorted(registered) == sorted(on_disk)
    assert len(set(registered)) == len(registered)


def test_registry_names_are_distinct():
    """URL paths and titles are unique; the root's hidden alias is none of them."""
    urls = [p.url_path for p in pages.PAGES]
    assert len(set(urls)) == len(urls)
    assert len({p.title for p in pages.PAGES}) == len(pages.PAGES)
    assert pages.HOME_URL_PATH not in urls
    assert pages.HOME is pages.PAGES[0]
    assert all(re.fullmatch(r":material/[a-z_]+:", p.icon) for p in pages.PAGES)


def test_script_lookup():
    """``script`` maps a URL path to its script; an unknown one names the known pages."""
    assert pages.script("compare") == "app_pages/compare.py"
    try:
        pages.script("nope")
    except KeyError as e:
        assert "'nope'" in str(e) and "runs, compare" in str(e)
    else:
        raise AssertionError("no KeyError")


def test_sections_keep_menu_order():
    """``sections`` groups the pages without reordering or dropping any."""
    grouped = pages.sections()
    assert [p for ps in grouped.values() for p in ps] == list(pages.PAGES)
    assert list(grouped) == ["Runs", "Inside one run"]


def _page_scripts_named(path: Path) -> list[tuple[int, str]]:
    """(line, script) of every quoted ``app_pages/<name>.py`` in a module's source."""
    return [
        (line_no, m.group(1))
        for line_no, line in enumerate(path.read_text().splitlines(), 1)
        for m in SCRIPT_LITERAL.finditer(line)
    ]


def test_page_scripts_are_named_only_in_the_registry_or_as_links():
    """``main.py`` spells no page script (its menu comes from the registry), and every page
    script another module names (``st.switch_page``, ``page_link``) is a registered one."""
    registered = {p.script for p in pages.PAGES}
    assert _page_scripts_named(APP / "main.py") == []
    named = [(path, *hit) for path in APP.rglob("*.py") for hit in _page_scripts_named(path)]
    assert len(named) >= 3  # the Runs page's two buttons and Health's step links
    for path, line, script in named:
        assert script in registered, f"{path.relative_to(APP)}:{line} names {script}"


def test_page_tests_open_every_registered_page():
    """The security and fuzz tests' list of pages is the registry's (they import it from
    ``test_security``)."""
    assert test_security.PAGES == tuple(p.url_path for p in pages.PAGES)


def test_registry_imports_without_streamlit():
    """``app.pages`` is plain data: importing it loads no Streamlit (the tests and ``app.cli``
    read it without starting an app)."""
    code = "import sys, app.pages; assert 'streamlit' not in sys.modules, 'streamlit imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
