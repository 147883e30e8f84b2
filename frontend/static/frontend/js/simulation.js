/* A simulation's page: the latency CDF, the queue and KV cache over time, and a rate sweep's knee. Reads the
   data the server rendered (#sim-cdf-data, #sim-series-data, #sim-sweep-data; frontend/charts.py shaped it);
   draws and formats it, computes nothing of its own. A chart whose data is absent is not drawn. */
(function () {
  "use strict";
  var hw = window.hw;
  var charts = (window.hwSimulationCharts = {});
  var PALETTE = hw.palette;
  var SLO_COLOUR = hw.sloColour, KNEE_COLOUR = "#15803d";

  // Vertical markers across the plot area at given x values (Chart.js has no annotation type): the knee.
  var markers = {
    id: "markers",
    afterDatasetsDraw: function (chart, args, options) {
      var x = chart.scales.x, area = chart.chartArea, ctx = chart.ctx;
      (options.lines || []).forEach(function (line) {
        if (line.value === null || line.value === undefined) return;
        var px = x.getPixelForValue(line.value);
        if (px < area.left || px > area.right) return;
        ctx.save();
        ctx.strokeStyle = line.colour; ctx.fillStyle = line.colour; ctx.lineWidth = 1.5; ctx.setLineDash([6, 4]);
        ctx.beginPath(); ctx.moveTo(px, area.top); ctx.lineTo(px, area.bottom); ctx.stroke();
        ctx.setLineDash([]); ctx.font = "12px system-ui, sans-serif"; ctx.textAlign = px > (area.left + area.right) / 2 ? "right" : "left";
        ctx.fillText(line.label, px + (ctx.textAlign === "left" ? 4 : -4), area.top + 12);
        ctx.restore();
      });
    },
  };

  // ---- latency CDF: one metric at a time (TTFT, TPOT and end-to-end differ by orders of magnitude) ----
  function cdfDatasets(metric) {
    return [{ label: metric.label, data: metric.points, showLine: true, pointRadius: 0, borderWidth: 2,
              borderColor: PALETTE[0], backgroundColor: PALETTE[0] }].concat(hw.cdfSloDatasets(metric.slo));
  }

  function drawCdf() {
    var data = hw.readJson("sim-cdf-data"), canvas = document.getElementById("cdf-chart");
    if (!data || !canvas || !data.metrics.length) return;
    charts.cdf = hw.cdfChart(canvas, data.metrics, cdfDatasets, "cdf-metric");
  }

  // ---- queue and KV cache over time: counts on the left axis, KV use (%) on the right ----
  function drawSeries() {
    var data = hw.readJson("sim-series-data"), canvas = document.getElementById("series-chart");
    if (!data || !canvas) return;
    function line(label, points, colour, axis) {
      return { label: label, data: points, showLine: true, pointRadius: 0, borderWidth: 1.5, borderColor: colour, backgroundColor: colour, yAxisID: axis };
    }
    charts.series = new Chart(canvas, {
      type: "scatter",
      data: { datasets: [line("Queue length (waiting)", data.queue, PALETTE[1], "y"), line("Running sequences", data.running, PALETTE[0], "y"),
                         line("KV cache in use", data.kv_percent, PALETTE[2], "y1")] },
      options: {
        responsive: true, maintainAspectRatio: false, animation: false, interaction: { mode: "nearest", axis: "x", intersect: false },
        scales: {
          x: { type: "linear", min: 0, title: { display: true, text: "Time" }, ticks: { callback: function (v) { return hw.fmtTime(v); }, maxTicksLimit: 10 } },
          y: { min: 0, title: { display: true, text: "Requests" }, ticks: { precision: 0 } },
          y1: { min: 0, max: 100, position: "right", title: { display: true, text: "KV cache in use" }, grid: { drawOnChartArea: false },
                ticks: { callback: function (v) { return v + "%"; } } },
        },
        plugins: { tooltip: { callbacks: { label: function (c) {
          var v = c.dataset.yAxisID === "y1" ? c.parsed.y.toFixed(1) + "%" : String(Math.round(c.parsed.y));
          return c.dataset.label + ": " + v + " at " + hw.fmtTime(c.parsed.x);
        } } } },
      },
    });
  }

  // ---- rate sweep: latency percentiles (log) and goodput against the rate, the SLO bounds and the knee ----
  function rateAxis(sweep) {
    return { type: sweep.x_scale, title: { display: true, text: "Request rate (requests/s)" },
             ticks: { callback: function (v) { return hw.fmtSi(v); }, maxTicksLimit: 10 } };
  }
  function kneeMarker(sweep) {
    return { lines: sweep.knee_rate_per_s === null ? [] : [{ value: sweep.knee_rate_per_s, label: "knee " + hw.fmtSi(sweep.knee_rate_per_s) + " req/s", colour: KNEE_COLOUR }] };
  }

  function drawSweep() {
    var sweep = hw.readJson("sim-sweep-data");
    if (!sweep) return;
    var low = sweep.rate_range[0], high = sweep.rate_range[1];
    var latency = document.getElementById("sweep-latency-chart"), goodput = document.getElementById("sweep-goodput-chart");
    if (latency) {
      var colours = { ttft_s: PALETTE[0], tpot_s: PALETTE[1] };
      var sets = sweep.lines.map(function (l) {
        return { label: l.label, data: l.points, showLine: true, pointRadius: 3, borderWidth: 2, borderColor: colours[l.metric],
                 backgroundColor: colours[l.metric], borderDash: l.stat === "p99" ? [5, 3] : l.stat === "p50" ? [] : [1, 2] };
      });
      Object.keys(sweep.slo).forEach(function (key) {
        var slo = sweep.slo[key];
        sets.push({ label: (key === "ttft_s" ? "TTFT" : "TPOT") + " SLO " + hw.sloText(slo), data: [{ x: low, y: slo.s }, { x: high, y: slo.s }], showLine: true,
                    pointRadius: 0, borderWidth: 1.5, borderDash: [2, 3], borderColor: colours[key], backgroundColor: colours[key] });
      });
      charts.sweepLatency = new Chart(latency, {
        type: "scatter", data: { datasets: sets }, plugins: [markers],
        options: {
          responsive: true, maintainAspectRatio: false, animation: false,
          scales: { x: rateAxis(sweep), y: { type: "logarithmic", title: { display: true, text: "Latency" },
                                             ticks: { callback: function (v) { return hw.fmtTime(v); }, maxTicksLimit: 8 } } },
          plugins: {
            markers: kneeMarker(sweep), legend: { position: "bottom", labels: { boxWidth: 12, font: { size: 11 } } },
            tooltip: { callbacks: { label: function (c) { return c.dataset.label + ": " + hw.fmtTime(c.parsed.y) + " at " + hw.fmtSi(c.parsed.x) + " req/s"; } } },
          },
        },
      });
    }
    if (goodput) {
      charts.sweepGoodput = new Chart(goodput, {
        type: "scatter",
        data: { datasets: [
          { label: "Goodput", data: sweep.goodput, showLine: true, pointRadius: 3, borderWidth: 2, borderColor: PALETTE[2], backgroundColor: PALETTE[2] },
          { label: "Offered rate", data: sweep.offered, showLine: true, pointRadius: 0, borderWidth: 1, borderDash: [4, 3], borderColor: "#64748b", backgroundColor: "#64748b" },
          { label: "Overloaded", data: sweep.overloaded, pointStyle: "triangle", pointRadius: 7, borderColor: SLO_COLOUR, backgroundColor: SLO_COLOUR },
        ] },
        plugins: [markers],
        options: {
          responsive: true, maintainAspectRatio: false, animation: false,
          scales: { x: rateAxis(sweep), y: { min: 0, title: { display: true, text: "Requests/s within every SLO" }, ticks: { callback: function (v) { return hw.fmtSi(v); } } } },
          plugins: {
            markers: kneeMarker(sweep), legend: { position: "bottom", labels: { boxWidth: 12, font: { size: 11 } } },
            tooltip: { callbacks: { label: function (c) { return c.dataset.label + ": " + hw.fmtSi(c.parsed.y) + " req/s at " + hw.fmtSi(c.parsed.x) + " req/s"; } } },
          },
        },
      });
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (typeof Chart === "undefined") return;
    drawCdf(); drawSeries(); drawSweep();
  });
})();
