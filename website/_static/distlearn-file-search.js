// Opened as a file (build/site/index.html, no web server), the browser refuses the fetch() with which Sphinx's
// search shows a snippet of each result (file:// has no origin: a CORS error per result). There, show the results
// without snippets; served over HTTP (`python -m http.server -d build/site`), with them.
if (window.location.protocol === "file:" && typeof DOCUMENTATION_OPTIONS !== "undefined") {
  DOCUMENTATION_OPTIONS.SHOW_SEARCH_SUMMARY = false;
}
