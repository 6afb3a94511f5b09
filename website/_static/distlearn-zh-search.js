// Sphinx 8.2 words its search summary "Search finished, found N pages matching the search query." (ngettext, keyed by
// the singular "…found one page…"); its zh_CN catalog only translates the older "page(s)" wording, so the Chinese
// site would show the summary in English. Chinese has one plural form (plural_expr "0"): one translation serves all N.
(() => {
  if (!(document.documentElement.lang || "").toLowerCase().startsWith("zh")) return;
  if (typeof Documentation === "undefined") return;
  Documentation.TRANSLATIONS["Search finished, found one page matching the search query."] =
    ["搜索完成，找到 ${resultCount} 个匹配的页面。"];
})();
