"""Compare: the page script ``app/pages.py`` registers; the page is ``app.compare.page``."""

from app.compare.page import render

render()
