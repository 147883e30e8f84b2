/* Results page: charts, row selection, validation progress. Reads the data the server
   rendered into #plan-chart-data; draws and formats it, computes nothing of its own. */
(function () {
  "use strict";
  var hw = window.hw;
  var data = hw.readJson("plan-chart-data") || { rows: [], roofs: {}, pareto_tpot: [], pareto_ttft: [] };
  var charts = (window.hwCharts = {});
  var latency = "tpot_s";
  var selected = hw.readJson("selected-rank") || 1;

  function rowByRank(rank) { return data.rows[rank - 1]; }
  function roofKey(row) { return row ? row.chip_slug + "/" + row.compute_dtype : null; }
  function roofList() { return Object.keys(data.roofs).map(function (k) { return data.roofs[k]; }); }

  // A ranked row as a point with its 80% ranges (error bars): cost up and down, latency left and right.
  function point(r) {
    var ranges = r.intervals || {}, cost = ranges.usd_per_million_output_tokens, lat = ranges[latency];
    return { x: r[latency], y: r.usd_per_million_output_tokens, rank: r.rank,
             xLow: lat ? lat[0] : null, xHigh: lat ? lat[1] : null, yLow: cost ? cost[0] : null, yHigh: cost ? cost[1] : null };
  }

  function scatterData() {
    var pts = data.rows.filter(function (r) { return r[latency] && r.usd_per_million_output_tokens !== null; }).map(point);
    var sel = rowByRank(selected);
    return [
      { label: "Selected", data: sel && sel[latency] && sel.usd_per_million_output_tokens !== null ? [point(sel)] : [],
        pointRadius: 8, pointStyle: "star", borderColor: "#b91c1c", backgroundColor: "#b91c1c", borderWidth: 2, order: 0 },
      { label: "Pareto front", data: latency === "tpot_s" ? data.pareto_tpot : data.pareto_ttft, showLine: true,
        borderColor: "#c2410c", backgroundColor: "#c2410c", pointRadius: 3, stepped: false, order: 1 },
      { label: "Feasible configurations", data: pts, borderColor: "rgba(11,92,173,0.7)", backgroundColor: "rgba(11,92,173,0.35)", pointRadius: 4, order: 2 },
    ];
  }

  // Draws each point's 80% ranges as thin bars under the points (Chart.js has no error-bar type).
  var errorBars = {
    id: "errorBars",
    beforeDatasetsDraw: function (chart) {
      var x = chart.scales.x, y = chart.scales.y, ctx = chart.ctx;
      ctx.save();
      ctx.lineWidth = 1;
      chart.data.datasets.forEach(function (ds, i) {
        if (!chart.isDatasetVisible(i) || ds.label === "Pareto front") return;
        ctx.strokeStyle = ds.label === "Selected" ? "rgba(185,28,28,0.8)" : "rgba(11,92,173,0.22)";
        ds.data.forEach(function (p) {
          var px = x.getPixelForValue(p.x), py = y.getPixelForValue(p.y);
          ctx.beginPath();
          if (p.yLow > 0 && p.yHigh > 0) { ctx.moveTo(px, y.getPixelForValue(p.yLow)); ctx.lineTo(px, y.getPixelForValue(p.yHigh)); }
          if (p.xLow > 0 && p.xHigh > 0) { ctx.moveTo(x.getPixelForValue(p.xLow), py); ctx.lineTo(x.getPixelForValue(p.xHigh), py); }
          ctx.stroke();
        });
      });
      ctx.restore();
    },
  };

  function drawScatter() {
    var canvas = document.getElementById("scatter-chart");
    if (!canvas) return;
    charts.scatter = new Chart(canvas, {
      type: "scatter",
      data: { datasets: scatterData() },
      plugins: [errorBars],
      options: {
        responsive: true, maintainAspectRatio: false, animation: false,
        scales: hw.costLatencyScales("TPOT"),
        plugins: { tooltip: { callbacks: { label: function (c) {
          var p = c.raw, text = (p.rank ? "#" + p.rank + " " : "") + hw.fmtUsd(p.y) + "/1M at " + hw.fmtTime(p.x);
          if (p.yLow && p.yHigh) text += " (80%: " + hw.fmtUsd(p.yLow) + "-" + hw.fmtUsd(p.yHigh) + ")";
          return text;
        } } } },
        onClick: function (evt, elements) {
          var hit = elements.find(function (e) { return charts.scatter.data.datasets[e.datasetIndex].data[e.index].rank; });
          if (hit) select(charts.scatter.data.datasets[hit.datasetIndex].data[hit.index].rank, true);
        },
      },
    });
  }

  function operatingPoints(row) {
    var pts = [];
    if (row && row.prefill) pts.push({ label: "Prefill (#" + row.rank + ", " + row.prefill_bound + "-bound)", data: [row.prefill],
      pointRadius: 8, pointStyle: "circle", borderColor: "#111", backgroundColor: "#facc15", borderWidth: 2, order: 0 });
    if (row && row.decode) pts.push({ label: "Decode (#" + row.rank + ", " + row.decode_bound + "-bound)", data: [row.decode],
      pointRadius: 8, pointStyle: "circle", borderColor: "#111", backgroundColor: "#22c55e", borderWidth: 2, order: 0 });
    return pts;
  }

  function drawRoofline() {
    var canvas = document.getElementById("roofline-chart");
    var row = rowByRank(selected);
    charts.roofline = hw.drawRoofline(canvas, roofList(), operatingPoints(row), roofKey(row));
  }

  function memoryDatasets(row) {
    var m = (row && row.memory) || {};
    function ds(label, key, color) { return { label: label, data: [m[key] || 0], backgroundColor: color, borderWidth: 0 }; }
    return [ds("Weights", "weights_bytes", "#0b5cad"), ds("KV cache", "kv_bytes", "#c2410c"),
            ds("Activations", "activation_bytes", "#7c3aed"), ds("Free", "free_bytes", "#d1d5db")];
  }

  function drawMemory() {
    var canvas = document.getElementById("memory-chart");
    if (!canvas) return;
    charts.memory = new Chart(canvas, {
      type: "bar",
      data: { labels: ["per chip"], datasets: memoryDatasets(rowByRank(selected)) },
      options: {
        indexAxis: "y", responsive: true, maintainAspectRatio: false, animation: false,
        scales: { x: { stacked: true, ticks: { callback: function (v) { return hw.fmtGB(v); } } }, y: { stacked: true } },
        plugins: { tooltip: { callbacks: { label: function (c) { return c.dataset.label + ": " + hw.fmtGB(c.raw); } } } },
      },
    });
  }

  function updateDetails() {
    var row = rowByRank(selected);
    var label = document.getElementById("selected-label");
    if (!row) return;
    label.textContent = "#" + row.rank + " " + row.label;
    var m = row.memory || {};
    document.querySelectorAll("#memory-table [data-mem]").forEach(function (td) {
      var key = td.dataset.mem;
      if (key === "headroom_fraction") td.textContent = hw.fmtPct(m.headroom_fraction);
      else if (key === "bounds") td.textContent = (row.prefill_bound || "–") + " / " + (row.decode_bound || "–");
      else td.textContent = hw.fmtGB(m[key]);
    });
    var c = row.cost || {};
    document.querySelectorAll("#cost-table [data-cost]").forEach(function (td) {
      var key = td.dataset.cost;
      if (!row.cost) td.textContent = "–";
      else if (key === "ownership") td.textContent = c.ownership === "own" ? "own (a purchase, priced as a whole system)" : "rent";
      else if (key === "offering") td.textContent = c.offering + (c.provider ? " (" + c.provider + ")" : "") + " · " + c.pricing_model;
      else if (key === "billed_chips") td.textContent = c.billed_chips === null ? "–" : c.billed_chips + (c.chips_per_unit > 1 ? " (units of " + c.chips_per_unit + ")" : "");
      else if (key === "utilisation") td.textContent = c.utilisation === null || c.utilisation === undefined ? "–" : hw.fmtPct(c.utilisation);
      else td.textContent = hw.fmtUsd(c[key]);
    });
    var split = document.getElementById("cost-split");
    if (split) {
      split.textContent = "";
      (c.split || []).forEach(function (part) {
        var tr = document.createElement("tr"), th = document.createElement("th"), td = document.createElement("td");
        th.scope = "row"; th.className = "small"; th.textContent = part[0]; td.textContent = hw.fmtUsd(part[1]) + " per chip-hour";
        tr.appendChild(th); tr.appendChild(td); split.appendChild(tr);
      });
    }
  }

  function select(rank, fromChart) {
    if (!rowByRank(rank)) return;
    selected = rank;
    document.querySelectorAll("#ranked-table tbody tr").forEach(function (tr) {
      var on = Number(tr.dataset.rank) === rank;
      tr.classList.toggle("selected", on);
      tr.setAttribute("aria-selected", String(on));
      if (on && fromChart) tr.scrollIntoView({ block: "nearest" });
    });
    updateDetails();
    syncValidateForm(rank);
    if (charts.memory) { charts.memory.data.datasets = memoryDatasets(rowByRank(rank)); charts.memory.update(); }
    if (charts.roofline) {
      var row = rowByRank(rank);
      charts.roofline.data.datasets = hw.rooflineDatasets(roofList(), roofKey(row)).concat(operatingPoints(row));
      charts.roofline.update();
    }
    if (charts.scatter) { charts.scatter.data.datasets = scatterData(); charts.scatter.update(); }
    if (history.replaceState && window.URLSearchParams) {
      var params = new URLSearchParams(location.search);  // keeps the ranking's view
      params.set("rank", rank);
      history.replaceState(null, "", "?" + params.toString() + location.hash);
    }
  }

  // The validate form is for the row the page was opened on (its queues depend on that row's chip): selecting
  // another row hides it and says how to validate that one, rather than leaving a form for a row not selected.
  function syncValidateForm(rank) {
    var section = document.getElementById("validate");
    if (!section) return;
    var same = Number(section.dataset.rank) === rank;
    var fields = document.getElementById("validate-fields"), other = document.getElementById("validate-other");
    if (fields) fields.hidden = !same;
    if (other) other.hidden = same;
  }

  function initTable() {
    var tbody = document.querySelector("#ranked-table tbody");
    if (!tbody) return;
    tbody.addEventListener("click", function (e) {
      var expand = e.target.closest("a[data-expand-chip]");
      if (expand) {  // the chip's other configurations, in place (the link itself shows them all)
        e.preventDefault();
        tbody.querySelectorAll("tr[data-chip]").forEach(function (tr) {
          if (tr.dataset.chip === expand.dataset.expandChip) tr.hidden = false;
        });
        expand.hidden = true;
        return;
      }
      if (e.target.closest("form, a")) return;  // a row's Validate button or sign-in link
      var tr = e.target.closest("tr[data-rank]");
      if (tr) select(Number(tr.dataset.rank));
    });
    tbody.addEventListener("keydown", function (e) {
      if ((e.key === "Enter" || e.key === " ") && e.target.matches("tr[data-rank]")) {
        e.preventDefault(); select(Number(e.target.dataset.rank));
      }
    });
  }

  function initLatencyToggle() {
    document.querySelectorAll("[data-latency]").forEach(function (b) {
      b.addEventListener("click", function () {
        latency = b.dataset.latency;
        document.querySelectorAll("[data-latency]").forEach(function (o) { o.setAttribute("aria-pressed", String(o === b)); });
        if (!charts.scatter) return;
        charts.scatter.options.scales.x.title.text = latency === "tpot_s" ? "TPOT" : "TTFT";
        charts.scatter.data.datasets = scatterData();
        charts.scatter.update();
      });
    });
  }

  // ---- validation progress: poll the public API every second while queued/running ----
  function poll(article) {
    var failures = 0;
    function tick() {
      fetch(article.dataset.api, { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
        .then(function (run) {
          failures = 0;
          var bar = article.querySelector("progress");
          if (bar) { bar.value = run.progress_percent || 0; bar.textContent = Math.round(run.progress_percent || 0) + "%"; }
          var msg = article.querySelector("[data-field=progress_message]");
          if (msg && run.progress_message) msg.textContent = run.progress_message;
          var st = article.querySelector("[data-field=status]");
          if (st) { st.textContent = run.status; st.className = "status " + run.status; }
          article.dataset.status = run.status;
          if (run.status === "queued" || run.status === "running") { setTimeout(tick, 1000); return; }
          // Finished: swap in the server-rendered result (predicted vs measured, or the failure).
          return fetch(article.dataset.fragment, { credentials: "same-origin" }).then(function (r) { return r.text(); })
            .then(function (html) { article.outerHTML = html; });
        })
        .catch(function () {
          failures += 1;
          if (failures < 10) { setTimeout(tick, 1000); return; }
          var msg = article.querySelector("[data-field=progress_message]");
          if (msg) msg.textContent = "Progress is unavailable right now; reload the page to check again.";
        });
    }
    tick();
  }

  // ---- the simulation stage: each simulated candidate's latency CDF, one metric at a time ----
  function drawStageCdf() {
    var stage = hw.readJson("stage-cdf-data"), canvas = document.getElementById("stage-cdf-chart");
    if (!stage || !canvas || !stage.metrics.length) return;
    // The SLO's red is the bound's alone: no candidate is drawn in it.
    var colours = hw.palette.filter(function (c) { return c !== hw.sloColour; });
    function datasets(metric) {
      return metric.candidates.map(function (c, i) {
        var colour = colours[i % colours.length];
        return { label: c.label + (c.meets ? "" : " (misses)"), data: c.points, showLine: true, pointRadius: 0, borderWidth: 2,
                 borderColor: colour, backgroundColor: colour, borderDash: c.meets ? [] : [4, 3], hidden: i >= stage.shown };
      }).concat(hw.cdfSloDatasets(metric.slo));
    }
    charts.stageCdf = hw.cdfChart(canvas, stage.metrics, datasets, "stage-cdf-metric", { shortLegend: true });
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (typeof Chart !== "undefined" && data.rows.length) {
      drawScatter(); drawRoofline(); drawMemory(); drawStageCdf();
    }
    updateDetails();
    initTable();
    initLatencyToggle();
    document.querySelectorAll(".validation[data-status=queued], .validation[data-status=running]").forEach(poll);
  });
})();
