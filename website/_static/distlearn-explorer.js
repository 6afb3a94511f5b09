/* Live explorers on the course website (issue 39; authoring/web_explorers.py writes the data).
 *
 * Each explorer's static picture sits in <div data-distlearn-explorer="NAME">. This script loads
 * _static/explorers/NAME.js (a <script>, so it works from file:// too), which holds what the explorer's own
 * Python showed for every setting the web controls offer: gzipped JSON in base64, read with the browser's
 * DecompressionStream. It then puts the notebook's controls above the output and, on every move, shows the
 * stored text and SVG figure of that setting. Nothing is computed here and nothing is fetched from outside
 * the site. Without JavaScript, or without DecompressionStream, the static picture stays.
 *
 * Controls that move together, as in the notebook (distlearn/core/explorer.py): a control's "links" list, per
 * offered value, the controls that value sets ([j, allowed option indices]: control j keeps its index if allowed,
 * else takes the first); a setting's third entry lists each limited slider's last option ([j, k]): the slider
 * offers no option past it, and a value past it is brought back to it. authoring/web_explorers.py's move() is the
 * same rule in Python.
 */
(function () {
  "use strict";
  if (typeof DecompressionStream === "undefined" || typeof Blob === "undefined") return;

  var NOTE = {
    en: ["Live explorer: every setting offered here was computed by this explorer's Python when the site was built.",
         "fixed on this page", "This setting could not be shown.", " The notebook offers more values."],
    zh: ["可交互的探索器：这里提供的每组设置，都由探索器自己的 Python 代码在生成网站时算好。", "本页固定",
         "无法显示这组设置。", "笔记本中可选的取值更多。"]
  };

  function siteRoot() {
    var r = document.documentElement.getAttribute("data-content_root");
    if (r) return r;
    if (window.DOCUMENTATION_OPTIONS && DOCUMENTATION_OPTIONS.URL_ROOT) return DOCUMENTATION_OPTIONS.URL_ROOT;
    return "./";
  }

  function loadData(name) {
    return new Promise(function (resolve, reject) {
      var store = window.distlearnExplorerData = window.distlearnExplorerData || {};
      if (store[name]) { resolve(store[name]); return; }
      var s = document.createElement("script");
      s.src = siteRoot() + "_static/explorers/" + name + ".js";
      s.onload = function () { store[name] ? resolve(store[name]) : reject(new Error("no data for " + name)); };
      s.onerror = function () { reject(new Error("cannot load " + s.src)); };
      document.head.appendChild(s);
    });
  }

  function decode(b64) {
    var bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(JSON.parse);
  }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function build(host, data, lang) {
    var note = NOTE[lang] || NOTE.en;
    var live = el("div", {"class": "distlearn-live", "lang": lang});
    if (data.title) live.appendChild(el("p", {"class": "distlearn-live-title"})).appendChild(el("b", {}, data.title));
    live.appendChild(el("p", {"class": "distlearn-live-note"}, "▶ " + note[0] + (data.reduced ? note[3] : "")));
    var form = live.appendChild(el("div", {"class": "distlearn-live-controls"}));
    var out = live.appendChild(el("div", {"class": "distlearn-live-output", "aria-live": "polite"}));
    var index = data.controls.map(function (c) { return c["default"]; });
    var inputs = [];
    var readouts = [];  // a slider's value as text, by control number
    var texts = {};  // decoded output parts, by output number
    var nodes = {};  // their elements

    data.controls.forEach(function (c, i) {
      var row = form.appendChild(el("div", {"class": "distlearn-live-row", "data-control": c.name}));
      var id = "dl-" + data.name.replace(/\W/g, "-") + "-" + c.name;
      var label = row.appendChild(el("label", {"for": id}, c.label));
      var input, shown = null, fixed = c.values.length < 2;
      if (c.kind === "checkbox") {
        input = el("input", {type: "checkbox", id: id});
        input.checked = c.values[c["default"]] === true;
        row.insertBefore(input, label);
        input.addEventListener("change", function () {
          var k = c.values.indexOf(input.checked);
          if (k < 0) { input.checked = !input.checked; return; }
          index[i] = k; follow(i); update();
        });
      } else if (c.kind === "select") {
        input = row.appendChild(el("select", {id: id}));
        c.labels.forEach(function (l, k) { input.appendChild(el("option", {value: String(k)}, l)); });
        input.value = String(c["default"]);
        input.addEventListener("change", function () { index[i] = +input.value; follow(i); update(); });
      } else {
        input = row.appendChild(el("input", {type: "range", id: id, min: "0", max: String(c.values.length - 1),
                                            step: "1"}));
        input.value = String(c["default"]);
        shown = row.appendChild(el("output", {"for": id}, c.labels[c["default"]]));
        input.addEventListener("input", function () {
          index[i] = +input.value; shown.textContent = c.labels[index[i]]; follow(i); update();
        });
      }
      if (fixed) {
        input.disabled = true;
        row.classList.add("distlearn-live-fixed");
        row.appendChild(el("span", {"class": "distlearn-live-fixed-note"}, "(" + note[1] + ")"));
      }
      inputs.push(input);
      readouts.push(shown);
    });

    function sync(j) {  // show control j at option index[j] (after a link or a limit moved it)
      var c = data.controls[j], input = inputs[j];
      if (c.kind === "checkbox") input.checked = c.values[index[j]] === true;
      else input.value = String(index[j]);
      if (readouts[j]) readouts[j].textContent = c.labels[index[j]];
    }

    function follow(i) {  // the controls that control i's new value sets
      var rules = data.controls[i].links;
      (rules ? rules[index[i]] : []).forEach(function (r) {
        if (r[1].indexOf(index[r[0]]) < 0) { index[r[0]] = r[1][0]; sync(r[0]); }
      });
    }

    function limit(entry) {  // each limited slider ends at its setting's last option; true if a value moved
      var moved = false;
      ((entry && entry[2]) || []).forEach(function (l) {
        inputs[l[0]].max = String(l[1]);
        if (index[l[0]] > l[1]) { index[l[0]] = l[1]; moved = true; }
        sync(l[0]);
      });
      return moved;
    }

    function part(o) {
      if (!texts[o]) {
        texts[o] = data.outputs[o].map(function (p) {
          return [p[0], p[1].map(function (j) { return data.pool[j]; }).join("\n")];
        });
      }
      return texts[o];
    }

    function view(o) {  // the output's elements, built once and kept (moving back to a setting is instant)
      if (!nodes[o]) {
        var fit = window.distlearnOutputs;  // distlearn-outputs.js: sentences wrap, rows keep their columns
        nodes[o] = part(o).map(function (p) {
          var pre, fig;
          if (p[0] !== "svg") {
            pre = el("pre", {"class": "distlearn-live-" + p[0]}, p[1]);
            if (fit) fit.wrapLines(pre);
            return pre;
          }
          fig = el("div", {"class": "distlearn-live-figure"});
          fig.innerHTML = p[1];
          if (fit && fig.querySelector("svg")) fit.boxFigure(fig.querySelector("svg"));  // readable on a phone
          return fig;
        });
      }
      return nodes[o];
    }

    function update() {
      var t0 = performance.now();
      var key = index.join(".");
      var entry = data.settings[key];
      if (limit(entry)) { key = index.join("."); entry = data.settings[key]; }
      out.textContent = "";
      if (!entry) {
        out.appendChild(el("p", {"class": "distlearn-live-missing"}, note[2]));
      } else {
        view(entry[0]).forEach(function (n) { out.appendChild(n); });
        var off = entry[1];
        inputs.forEach(function (inp, i) {
          if (data.controls[i].values.length > 1) {
            inp.disabled = off.indexOf(i) >= 0;
            inp.parentNode.classList.toggle("distlearn-live-inactive", inp.disabled);
          }
        });
      }
      host.setAttribute("data-setting", key);
      host.setAttribute("data-redraw-ms", (performance.now() - t0).toFixed(2));
    }

    update();
    var stat = host.querySelector(".distlearn-explorer-static");
    host.appendChild(live);
    if (stat) stat.hidden = true;
    host.classList.add("distlearn-live-ready");
  }

  function init(host) {
    var name = host.getAttribute("data-distlearn-explorer");
    var lang = host.getAttribute("data-lang") || document.documentElement.lang || "en";
    lang = lang.slice(0, 2) === "zh" ? "zh" : "en";
    loadData(name).then(decode).then(function (data) { build(host, data, lang); }).catch(function (err) {
      host.setAttribute("data-live-error", String(err));  // the static picture stays
    });
  }

  function start() {
    document.querySelectorAll("[data-distlearn-explorer]").forEach(init);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
