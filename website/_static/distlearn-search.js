// The site's search (Sphinx's searchtools.js), two changes; authoring/website.py and tests/test_site_search.py.
//
// 1. Chinese queries are cut into the words the index holds. Sphinx cuts each page's Chinese text into words with
//    jieba when it builds the index (sphinx/search/zh.py; the glossary's Chinese terms are added to jieba's
//    dictionary and indexed whole, authoring.website.chinese_search_language), but in the browser it splits a query only at spaces and
//    punctuation: "专家并行" was looked up as one word and found nothing while "专家" found 11 pages. Here a run of
//    Chinese characters is cut into the fewest words that the index itself holds (a shortest path over the run;
//    a character that starts no indexed word is skipped, as the index drops one-character words). The index's own
//    word list is the dictionary: a word missing from it cannot match any page, and jieba's dictionary (5 MB) would
//    have to be shipped to every reader.
// 2. A result's snippet starts at the matching text of the article, not at the theme's buttons ("Settings Light
//    Dark"): Sphinx looks for the stemmed word ("memori" is not in "memory"), falls back to the start of the whole
//    <main>, and starts 120 characters before a match.
// This file loads before searchtools.js (html_js_files): `splitQuery` defined here is kept by it, and the Search
// object is patched on DOMContentLoaded, before searchtools' own handler runs the query.
// 3. Ranking: the chapters come before the exercises and solutions that repeat their words (Sphinx scores a page by
//    the words it holds, 15 for a heading, 5 for text: "专家并行" listed solutions/11 above notebooks/11); an exercise
//    still shows, after them, and first when no chapter matches. Sphinx keeps a `Scorer` defined before its
//    own (searchtools.js: `if (typeof Scorer === "undefined")`) and calls `Scorer.score(result)` on every result;
//    the constants below are Sphinx's own defaults.
// 4. The search page's language switch keeps the query (?q=…), so a reader who switches language sees the same
//    search in the other language.
"use strict";

var DISTLEARN_HAN = /\p{Script=Han}+/gu;
var DISTLEARN_DEMOTED = /^(exercises|solutions)\//;   // docnames ranked below the chapters
var DISTLEARN_DEMOTION = 100;  // more than any page's score for a query of a few words: chapters, then the rest

var Scorer = {
  score: (result) => (DISTLEARN_DEMOTED.test(result[0]) ? result[4] - DISTLEARN_DEMOTION : result[4]),
  objNameMatch: 11, objPartialMatch: 6, objPrio: { 0: 15, 1: 5, 2: -5 }, objPrioDefault: 0,
  title: 15, partialTitle: 7, term: 5, partialTerm: 2,
};

// Whether `word` is a word of the loaded index (its text or its titles).
function distlearnIndexed(word) {
  const index = typeof Search !== "undefined" ? Search._index : null;
  if (!index) return false;
  const own = (o) => o && Object.prototype.hasOwnProperty.call(o, word);
  return own(index.terms) || own(index.titleterms);
}

// The fewest indexed words (two characters or more) that a run of Chinese characters splits into; a character
// that begins none is skipped at a cost of 2 (so two one-word halves beat skipping both characters).
function distlearnSegment(run) {
  const n = run.length;
  const best = new Array(n + 1).fill(null);
  best[0] = { cost: 0, words: [] };
  const offer = (j, cost, words) => {
    if (best[j] === null || cost < best[j].cost) best[j] = { cost, words };
  };
  for (let i = 0; i < n; i++) {
    if (best[i] === null) continue;
    offer(i + 1, best[i].cost + 2, best[i].words);
    for (let j = i + 2; j <= Math.min(n, i + 24); j++) {
      const word = run.slice(i, j);
      if (distlearnIndexed(word)) offer(j, best[i].cost + 1, best[i].words.concat([word]));
    }
  }
  return best[n].words;
}

// A query with Chinese in it that the index holds whole, spaces left out ("K/V 块" → "k/v块": the Chinese index
// holds each glossary term so, authoring.website.index_word), is looked up as that one word. Otherwise Sphinx's own
// split (at anything that is not a letter, digit, "_" or emoji), then each run of Chinese characters cut into
// indexed words. Before the index has loaded, a run is kept whole.
var splitQuery = (query) => {
  const whole = query.replace(/\s+/g, "").toLowerCase();
  if (/\p{Script=Han}/u.test(whole) && distlearnIndexed(whole)) return [whole];
  const out = [];
  for (const token of query.split(/[^\p{Letter}\p{Number}_\p{Emoji_Presentation}]+/gu)) {
    if (!token) continue;
    let last = 0;
    for (const m of token.matchAll(DISTLEARN_HAN)) {
      if (m.index > last) out.push(token.slice(last, m.index));
      const run = m[0];
      if (typeof Search === "undefined" || !Search._index) out.push(run);
      else out.push(...distlearnSegment(run));
      last = m.index + run.length;
    }
    if (last < token.length) out.push(token.slice(last));
  }
  // the Chinese index keeps no one-character word (sphinx/search/zh.py word_filter): such a query word could
  // match no page, and Sphinx would then show none at all
  const zh = (document.documentElement.lang || "").toLowerCase().startsWith("zh");
  return zh ? out.filter((w) => w.length > 1) : out;
};

// The text a snippet is taken from: the page's article (or the anchored section of it), without the theme's
// header buttons, permalinks, scripts and styles; runs of white space made one space.
function distlearnArticleText(htmlString, anchor) {
  const doc = new DOMParser().parseFromString(htmlString, "text/html");
  const drop = [".headerlink", "script", "style", ".bd-header-article", ".header-article-items", ".prev-next-area",
                ".distlearn-lang-toggle", "button", "nav", ".bd-sidebar-secondary"];
  drop.forEach((q) => doc.querySelectorAll(q).forEach((el) => el.remove()));
  const main = doc.querySelector("article.bd-article") || doc.querySelector('[role="main"]');
  let node = main;
  if (main && anchor) {
    try { node = main.querySelector(anchor) || main; } catch (e) { node = main; }
  }
  return node ? node.textContent.replace(/\s+/g, " ").trim() : "";
}

// Where the snippet starts in `text`: the first place of the whole query, else the earliest place of any query
// word as typed, else of any stemmed word; a match inside a Latin word moves back to the word's start. -1: none.
function distlearnMatchStart(text, query, words, stems) {
  const lower = text.toLowerCase();
  const firstOf = (list) => {
    const found = [...list].filter((w) => w).map((w) => lower.indexOf(w.toLowerCase())).filter((i) => i > -1);
    return found.length ? Math.min(...found) : -1;
  };
  let at = query ? lower.indexOf(query.toLowerCase().trim()) : -1;
  if (at < 0) at = firstOf(words);
  if (at < 0) at = firstOf(stems);
  while (at > 0 && /[A-Za-z0-9_]/.test(text[at - 1]) && /[A-Za-z0-9_]/.test(text[at])) at--;
  return at;
}

function distlearnSummary(htmlText, keywords, anchor) {
  const text = distlearnArticleText(htmlText, anchor);
  if (text === "") return null;
  const last = Search._distlearnLast || { query: "", words: [] };
  const at = distlearnMatchStart(text, last.query, last.words, keywords);
  const start = Math.max(at, 0);
  const summary = document.createElement("p");
  summary.classList.add("context");
  summary.textContent = (start > 0 ? "… " : "") + text.substr(start, 240).trim() +
    (start + 240 < text.length ? " …" : "");
  return summary;
}

document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined") return;
  const parse = Search._parseQuery;
  Search._parseQuery = (query) => {
    const parsed = parse(query);
    // parsed[1]: the stemmed words searched for; parsed[3]: the words as typed, lowercased
    Search._distlearnLast = { query: query, words: [...parsed[3]], stems: [...parsed[1]] };
    return parsed;
  };
  Search.makeSearchSummary = distlearnSummary;
});

document.addEventListener("DOMContentLoaded", () => {
  const q = new URLSearchParams(window.location.search).get("q");
  if (!q) return;
  document.querySelectorAll("a.distlearn-lang-toggle").forEach((a) => {
    const url = new URL(a.getAttribute("href"), window.location.href);
    if (!url.pathname.endsWith("/search.html")) return;
    url.searchParams.set("q", q);
    a.setAttribute("href", url.href);
  });
});
