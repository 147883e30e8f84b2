/* hwplanner: small page behaviours (no framework). Formatting and drawing only. */
(function () {
  "use strict";
  var hw = (window.hw = window.hw || {});

  // ---- number formatting (display only) ----
  function sig(v) { return String(parseFloat(Number(v).toPrecision(3))); }
  hw.fmtSi = function (v, unit) {
    if (v === null || v === undefined || isNaN(v)) return "–";
    var p = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (var i = 0; i < p.length; i++) if (Math.abs(v) >= p[i][0]) return sig(v / p[i][0]) + " " + p[i][1] + (unit || "");
    return sig(v) + (unit ? " " + unit : "");
  };
  hw.fmtGB = function (bytes) { return bytes === null || bytes === undefined ? "–" : sig(bytes / 1e9) + " GB"; };
  hw.fmtTime = function (s) { return s === null || s === undefined ? "–" : (s < 1 ? sig(s * 1000) + " ms" : sig(s) + " s"); };
  hw.fmtUsd = function (v) {
    if (v === null || v === undefined) return "–";
    return Math.abs(v) >= 1000 ? "$" + Math.round(v).toLocaleString("en-US") : "$" + sig(v);
  };
  hw.fmtPct = function (f) { return f === null || f === undefined ? "–" : (f * 100).toFixed(1) + "%"; };

  hw.readJson = function (id) { var el = document.getElementById(id); return el ? JSON.parse(el.textContent) : null; };
  // The log-log axes of a cost-latency chart: latency (TPOT or TTFT) across, $ per 1M output tokens up.
  hw.costLatencyScales = function (latencyLabel) {
    return {
      x: { type: "logarithmic", title: { display: true, text: latencyLabel }, ticks: { callback: function (v) { return hw.fmtTime(v); }, maxTicksLimit: 8 } },
      y: { type: "logarithmic", title: { display: true, text: "$ per 1M output tokens" }, ticks: { callback: function (v) { return hw.fmtUsd(v); }, maxTicksLimit: 8 } },
    };
  };

  // ---- sortable tables: click (or Enter/Space on) a header button ----
  function sortTable(table, col, th) {
    var tbody = table.tBodies[0];
    var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir);
    var numeric = th.dataset.type === "number";
    var rows = Array.prototype.slice.call(tbody.rows);
    rows.sort(function (a, b) {
      var x = a.cells[col].dataset.value, y = b.cells[col].dataset.value;
      if (x === undefined) x = a.cells[col].textContent.trim();
      if (y === undefined) y = b.cells[col].textContent.trim();
      var r;
      if (numeric) {
        var nx = x === "" ? Infinity : parseFloat(x), ny = y === "" ? Infinity : parseFloat(y);
        r = nx === ny ? 0 : (nx < ny ? -1 : 1);
      } else { r = x.localeCompare(y); }
      return dir === "ascending" ? r : -r;
    });
    rows.forEach(function (r) { tbody.appendChild(r); });
  }
  hw.initSortable = function () {
    document.querySelectorAll("table.sortable").forEach(function (table) {
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
        if (th.dataset.nosort !== undefined) return;
        var label = th.innerHTML;
        th.innerHTML = "";
        var b = document.createElement("button");
        b.type = "button"; b.className = "sort"; b.innerHTML = label;
        b.addEventListener("click", function () { sortTable(table, col, th); });
        th.appendChild(b);
      });
    });
  };

  // ---- plan form ----
  function initPlanForm() {
    var form = document.getElementById("plan-form");
    if (!form) return;
    var presets = hw.readJson("presets-data") || {};
    var select = document.getElementById("id_model");
    var filter = document.getElementById("model-filter");
    if (filter && select) {
      filter.addEventListener("input", function () {
        var q = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
        Array.prototype.forEach.call(select.options, function (o) {
          var t = o.textContent.toLowerCase();
          o.hidden = !q.every(function (w) { return t.indexOf(w) >= 0; });
        });
      });
      filter.addEventListener("keydown", function (e) {
        if (e.key === "ArrowDown") { e.preventDefault(); select.focus(); }
      });
    }
    function setLoad() {
      var kind = (form.querySelector("input[name=load_kind]:checked") || {}).value || "concurrency";
      form.querySelectorAll("[data-load]").forEach(function (el) {
        var on = el.dataset.load.split(" ").indexOf(kind) >= 0;
        el.querySelectorAll("input").forEach(function (i) { i.disabled = !on; });
        el.style.opacity = on ? "" : "0.5";
      });
    }
    form.querySelectorAll("input[name=load_kind]").forEach(function (r) { r.addEventListener("change", setLoad); });
    form.querySelectorAll("[data-preset]").forEach(function (button) {
      button.addEventListener("click", function () {
        var p = presets[button.dataset.preset];
        if (!p) return;
        ["prompt_tokens", "output_tokens", "concurrency", "request_rate_per_s", "ttft_slo_s", "tpot_slo_s"].forEach(function (name) {
          var input = form.elements[name];
          if (input) input.value = p[name] === null || p[name] === undefined ? "" : p[name];
        });
        var radio = form.querySelector("input[name=load_kind][value=" + p.load_kind + "]");
        if (radio) radio.checked = true;
        document.getElementById("id_preset").value = button.dataset.preset;
        form.querySelectorAll("[data-preset]").forEach(function (b) { b.setAttribute("aria-pressed", String(b === button)); });
        setLoad();
      });
    });
    // Decoding: show the settings of the chosen method; default the method to the model's kind.
    var method = document.getElementById("id_decoding_method");
    function showMethod() {
      form.querySelectorAll("[data-method]").forEach(function (el) { el.hidden = el.dataset.method !== method.value; });
    }
    function methodForModel() {
      var opt = select && select.selectedOptions[0];
      if (!opt) return;
      var kind = opt.dataset.kind;
      var want = kind === "diffusion" ? "diffusion" : kind === "block_diffusion" ? "block_diffusion" : null;
      if (want) method.value = want;
      else if (method.value === "diffusion" || method.value === "block_diffusion") method.value = "ar";
      showMethod();
    }
    if (method) { method.addEventListener("change", showMethod); showMethod(); }
    if (select && method) select.addEventListener("change", methodForModel);
    setLoad();
    // Loading state: a search takes a moment; say so and stop double submits.
    form.addEventListener("submit", function () {
      var button = document.getElementById("plan-submit");
      if (!button) return;  // an anonymous visitor's form has a sign-in link instead
      button.disabled = true; button.textContent = "Planning…"; form.setAttribute("aria-busy", "true");
    });
    // Back/forward cache: a page restored after a submit must be usable again.
    window.addEventListener("pageshow", function () {
      var button = document.getElementById("plan-submit");
      if (!button) return;
      button.disabled = false; button.textContent = "Plan"; form.removeAttribute("aria-busy");
    });
    var selected = select && select.selectedOptions[0];
    if (selected) selected.scrollIntoView({ block: "nearest" });
    var firstInvalid = form.querySelector("[aria-invalid=true]");
    if (firstInvalid) firstInvalid.focus();
  }

  // ---- latency CDFs (a simulation's, a plan's candidates'): one metric at a time, with its SLO ----
  var SLO_COLOUR = "#b91c1c";
  hw.sloColour = SLO_COLOUR;
  hw.sloText = function (slo) { return slo.p ? "p" + slo.p + " ≤ " + hw.fmtTime(slo.s) : "≤ " + hw.fmtTime(slo.s); };
  // The SLO's bound as a vertical line across the CDF and its percentile as a cross on it.
  hw.cdfSloDatasets = function (slo) {
    if (!slo) return [];
    var sets = [{ label: "SLO " + hw.sloText(slo), data: [{ x: slo.s, y: 0 }, { x: slo.s, y: 1 }], showLine: true, pointRadius: 0,
                  borderDash: [6, 4], borderWidth: 1.5, borderColor: SLO_COLOUR, backgroundColor: SLO_COLOUR }];
    if (slo.p) sets.push({ label: "SLO target", data: [{ x: slo.s, y: slo.p / 100 }], pointStyle: "crossRot", pointRadius: 8,
                           borderWidth: 2, borderColor: SLO_COLOUR, backgroundColor: SLO_COLOUR });
    return sets;
  };
  // A CDF chart on `canvas` of data.metrics (each {key, label, ...}), datasetsFor(metric) drawing one, and the buttons
  // carrying `data-<buttonAttr>` switching between them. `options.shortLegend`: a legend of many lines names each by its
  // first words ("#12 1x nvidia-a100-sxm-80gb"), small, so every one fits and can be switched on (the tooltip names it whole).
  hw.cdfChart = function (canvas, metrics, datasetsFor, buttonAttr, options) {
    var legend = {};
    if (options && options.shortLegend) {
      legend = { labels: { boxWidth: 12, font: { size: 11 }, generateLabels: function (chart) {
        return Chart.defaults.plugins.legend.labels.generateLabels(chart).map(function (item) {
          var text = item.text.split(" · ")[0];
          item.text = text + (item.text.indexOf("(misses)") >= 0 && text.indexOf("(misses)") < 0 ? " (misses)" : "");
          return item;
        });
      } } };
    }
    var byKey = {};
    metrics.forEach(function (m) { byKey[m.key] = m; });
    var chart = new Chart(canvas, {
      type: "scatter",
      data: { datasets: datasetsFor(metrics[0]) },
      options: {
        responsive: true, maintainAspectRatio: false, animation: false,
        scales: {
          x: { type: "linear", min: 0, title: { display: true, text: metrics[0].label }, ticks: { callback: function (v) { return hw.fmtTime(v); }, maxTicksLimit: 8 } },
          y: { min: 0, max: 1, title: { display: true, text: "Share of requests" }, ticks: { callback: function (v) { return Math.round(v * 100) + "%"; } } },
        },
        plugins: { legend: legend, tooltip: { callbacks: { label: function (c) {
          return c.dataset.label + ": " + hw.fmtPct(c.parsed.y) + " of requests within " + hw.fmtTime(c.parsed.x);
        } } } },
      },
    });
    var selector = "[data-" + buttonAttr + "]";
    document.querySelectorAll(selector).forEach(function (button) {
      button.addEventListener("click", function () {
        var chosen = byKey[button.getAttribute("data-" + buttonAttr)];
        if (!chosen) return;
        document.querySelectorAll(selector).forEach(function (b) { b.setAttribute("aria-pressed", String(b === button)); });
        chart.data.datasets = datasetsFor(chosen);
        chart.options.scales.x.title.text = chosen.label;
        chart.update();
      });
    });
    return chart;
  };

  // ---- roofline chart (log-log) ----
  var PALETTE = ["#0b5cad", "#c2410c", "#15803d", "#7c3aed", "#b91c1c", "#0e7490", "#a16207", "#be185d", "#4d7c0f", "#334155"];
  hw.palette = PALETTE;
  hw.rooflineDatasets = function (roofs, highlightSlug) {
    var sets = [];
    roofs.forEach(function (roof, i) {
      var hi = highlightSlug && (roof.key || roof.slug) === highlightSlug;
      var color = PALETTE[i % PALETTE.length];
      sets.push({
        label: roof.label, data: roof.points, showLine: true, borderColor: color, backgroundColor: color,
        borderWidth: hi ? 3.5 : (highlightSlug ? 1 : 2), pointRadius: 0, borderDash: hi || !highlightSlug ? [] : [4, 3], order: 5,
      });
      sets.push({
        label: "ridge " + roof.slug, data: [{ x: roof.ridge_flop_per_byte, y: roof.peak_flops_per_s }], pointStyle: "rectRot",
        pointRadius: hi ? 6 : 4, borderColor: color, backgroundColor: color, showLine: false, order: 4, hwRidge: true,
      });
    });
    return sets;
  };
  hw.rooflineOptions = function () {
    return {
      responsive: true, maintainAspectRatio: false, animation: false,
      scales: {
        x: { type: "logarithmic", title: { display: true, text: "Arithmetic intensity (FLOP/byte)" },
             ticks: { callback: function (v) { var l = Math.log10(v); return Math.abs(l - Math.round(l)) < 1e-9 ? hw.fmtSi(v) : ""; } } },
        y: { type: "logarithmic", title: { display: true, text: "Attainable FLOP/s per chip" },
             ticks: { callback: function (v) { var l = Math.log10(v); return Math.abs(l - Math.round(l)) < 1e-9 ? hw.fmtSi(v, "FLOP/s") : ""; } } },
      },
      plugins: {
        legend: { position: "bottom", labels: { filter: function (item, data) { return !data.datasets[item.datasetIndex].hwRidge; }, boxWidth: 10, font: { size: 11 } } },
        tooltip: { callbacks: { label: function (c) {
          return c.dataset.label + ": " + hw.fmtSi(c.parsed.y, "FLOP/s") + " at " + sig(c.parsed.x) + " FLOP/byte";
        } } },
      },
    };
  };
  hw.drawRoofline = function (canvas, roofs, extra, highlightSlug) {
    if (!canvas || typeof Chart === "undefined") return null;
    var datasets = hw.rooflineDatasets(roofs, highlightSlug).concat(extra || []);
    return new Chart(canvas, { type: "scatter", data: { datasets: datasets }, options: hw.rooflineOptions() });
  };

  function initCatalogRooflines() {
    document.querySelectorAll("canvas[data-roofs]").forEach(function (canvas) {
      hw.drawRoofline(canvas, hw.readJson(canvas.dataset.roofs) || []);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    hw.initSortable();
    initPlanForm();
    initCatalogRooflines();
  });
})();
