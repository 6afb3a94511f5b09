/* Cell outputs that fit a phone (website/conf.py lists this file; distlearn-explorer.js calls it for live outputs).
 *
 * Text outputs. A printed line is either a row of columns ("fp32    adam    4    4    8    16") or a sentence
 * ("activations, s=2048: seed code 2.1 GB | Llama, flash 10.1 GB ..."). A row keeps its columns only unbroken, so
 * it stays on one line and the output scrolls sideways inside its own box (never the page); a sentence wraps at the
 * box's edge, its continuation lines 2 characters further in than its first (a hanging indent). The rule, per line: a line is
 * a row when, after its indentation, two or more spaces stand between two characters (the gap that aligns a column),
 * when it is indented 16 spaces or more (it sits in a column: a header over numbers, a continuation under a label;
 * a phone's box holds about 40 characters), or when it holds a tab; any other line is a sentence (printed code
 * indented less wraps like a sentence, under its own indentation). Output with colours (ANSI spans) is left as it
 * is.
 *
 * Figures. A picture shrunk to the width of a phone's column (358 CSS px) showed its text at a third of its size.
 * Each output figure (a PNG of the notebook, an explorer's static picture, a live explorer's SVG) gets its own box
 * and its intrinsic width as --dl-natural-w; on a narrow screen distlearn-site.css shows it at no less than 0.8 of
 * that width (matplotlib's 10 pt text at 100 dpi stays >= 11 CSS px), scrolling sideways in its box when wider than
 * the column.
 */
(function () {
  "use strict";
  var ROW = /\S[ ]{2,}(?=\S)|^[ ]{16}|\t/;

  function isRow(line) { return ROW.test(line); }

  function wrapLines(pre) {
    if (!pre || pre.getAttribute("data-distlearn-lines")) return;
    // plain text only (Pygments puts an empty <span></span> first); coloured output keeps its spans untouched
    for (var c = pre.firstElementChild; c; c = c.nextElementSibling) {
      if (c.tagName !== "SPAN" || c.textContent !== "") { pre.setAttribute("data-distlearn-lines", "kept"); return; }
    }
    var lines = pre.textContent.split("\n");
    var frag = document.createDocumentFragment(), rows = 0, sentences = 0;
    lines.forEach(function (line, i) {
      if (line && !isRow(line) && line.trim()) {
        var s = document.createElement("span");
        s.className = "distlearn-wrap";
        var indent = line.length - line.replace(/^ +/, "").length;
        if (indent) s.style.setProperty("--dl-indent", indent + "ch");
        s.textContent = line;
        frag.appendChild(s);
        sentences++;
      } else {
        if (line.trim()) rows++;
        frag.appendChild(document.createTextNode(line));
      }
      if (i < lines.length - 1) frag.appendChild(document.createTextNode("\n"));
    });
    pre.textContent = "";
    pre.appendChild(frag);
    pre.setAttribute("data-distlearn-lines", rows + " rows, " + sentences + " sentences");
  }

  function naturalWidth(fig) {
    if (fig.tagName.toLowerCase() === "svg") {
      try { return fig.width.baseVal.value; } catch (e) { return 0; }
    }
    return fig.naturalWidth;
  }

  function boxFigure(fig) {
    if (fig.getAttribute("data-distlearn-figure")) return;
    fig.setAttribute("data-distlearn-figure", "1");
    var parent = fig.parentNode;
    if (!parent.classList.contains("distlearn-figure")) {
      if (parent.classList.contains("distlearn-live-figure")) {
        parent.classList.add("distlearn-figure");
      } else {
        var box = document.createElement("div");
        box.className = "distlearn-figure";
        parent.insertBefore(box, fig);
        box.appendChild(fig);
      }
    }
    function measure() {
      var w = naturalWidth(fig);
      if (w > 0) fig.style.setProperty("--dl-natural-w", w + "px");
    }
    if (fig.tagName.toLowerCase() === "img" && !fig.complete) fig.addEventListener("load", measure);
    else measure();
  }

  var TEXT = ".cell_output pre, .distlearn-live-output pre";
  var FIGURES = ".cell_output img, .distlearn-live-figure > svg";

  function fit(root) {
    (root || document).querySelectorAll(TEXT).forEach(wrapLines);
    (root || document).querySelectorAll(FIGURES).forEach(boxFigure);
  }

  window.distlearnOutputs = {fit: fit, isRow: isRow, wrapLines: wrapLines, boxFigure: boxFigure};
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", function () { fit(); });
  else fit();
})();
