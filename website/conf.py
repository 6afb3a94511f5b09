"""Sphinx configuration of the course website, one build per language (see ``authoring/website.py``).

``python -m authoring.website build`` (``make site``) writes each language's monolingual notebooks under
``build/site-work/<lang>/src/`` and runs Sphinx on them with this folder as the configuration folder; ``language`` and
``html_context`` are passed in as overrides. Nothing is executed: the pages show the outputs stored in the notebooks.
"""
import os

project = "distlearn"
author = "distlearn authors"
copyright = "distlearn authors, MIT licence"

extensions = [
    "myst_nb",                  # reads .ipynb (and MyST markdown) with the outputs stored in them
    "sphinx-mathjax-offline",   # MathJax 3 copied into _static/: formulas render without a network
    "authoring.website",        # language toggle, explorer fall-back pictures, chapter links (html-page-context)
]
nb_execution_mode = "off"       # never run a notebook at build time: the stored, checked outputs are the page
nb_output_stderr = "show"
# The explorers' outputs carry a widget view (needs a live kernel) and a static picture (text/html, made by
# distlearn.core.explorer). A static site shows the picture.
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

exclude_patterns = ["_build", "**.ipynb_checkpoints"]
templates_path = ["_templates"]
# the Chinese site's page furniture that Sphinx and the themes leave untranslated (relative paths would be read
# from the source folder, build/site-work/<lang>/src/)
locale_dirs = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "locale")]
gettext_compact = False
html_static_path = ["_static"]
html_css_files = ["distlearn-site.css",
                  "distlearn-explorer.css"]  # live explorers (authoring/web_explorers.py)
html_js_files = ["distlearn-file-search.js",  # opened from file://: search results without snippets (no CORS error)
                 "distlearn-zh-search.js",   # the Chinese site: the search summary in Chinese (Sphinx 8.2 lacks it)
                 "distlearn-outputs.js",     # text outputs: sentences wrap, rows of columns scroll; figures' size
                 "distlearn-explorer.js",    # live explorers over the data of authoring/web_explorers.py
                 "distlearn-search.js"]      # Chinese queries cut into the index's words; snippets at the match
html_theme = "sphinx_book_theme"
html_title = "distlearn"
html_favicon = "_static/favicon.svg"  # also spares the browser a request for /favicon.ico
html_copy_source = True          # the monolingual .ipynb of each page, for the download button
html_show_sourcelink = False
html_last_updated_fmt = None
html_context = {"default_mode": "light"}  # pydata-sphinx-theme: light unless the reader switches
html_theme_options = {
    "repository_url": "https://github.com/distlearn/distlearn",
    "repository_branch": "main",
    # build/site-work/<lang>/src/ mirrors courses/<lang>/ (notebooks/, exercises/, solutions/): authoring.website
    # sets "courses/<lang>" here, so that the launch (Binder) and repository buttons open that language's copy
    "path_to_docs": "",
    "use_repository_button": True,
    "use_source_button": True,   # "open": the notebook in the repository
    "use_download_button": True,
    "launch_buttons": {"binderhub_url": "https://mybinder.org", "notebook_interface": "jupyterlab"},
    "article_header_end": ["lang-toggle.html", "article-header-buttons.html"],
    # pydata-sphinx-theme 0.16+ puts its own search field in a top bar when this is unset (sphinx-book-theme's
    # empty default does not count as set): desktop pages showed two search fields, that bar's and the sidebar's.
    # The sidebar's field (desktop) and the article header's search icon (narrow screens) stay: one at every width.
    "navbar_persistent": [],
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
suppress_warnings = ["myst.header"]  # a chapter's first cell is its one H1; later levels may skip (## after #)
