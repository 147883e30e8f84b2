/* Plan compare: both plans' ranked configurations on one cost-latency chart. Reads #compare-points,
   which the server rendered; draws it, computes nothing of its own. */
(function () {
  "use strict";
  var hw = window.hw;
  var points = hw.readJson("compare-points") || { a: [], b: [] };
  var latency = "tpot_s";
  var chart = null;

  function dataset(label, rows, colour, style) {
    return {
      label: label, pointStyle: style, pointRadius: 4, borderColor: colour, backgroundColor: colour,
      data: rows.map(function (r) { return { x: r[latency], y: r.usd, rank: r.rank }; }),
    };
  }

  function datasets() {
    return [dataset("Plan A", points.a, "rgba(11,92,173,0.6)", "circle"), dataset("Plan B", points.b, "rgba(194,65,12,0.6)", "triangle")];
  }

  function draw() {
    var canvas = document.getElementById("compare-chart");
    if (!canvas || typeof Chart === "undefined") return;
    chart = window.hwCompareChart = new Chart(canvas, {
      type: "scatter",
      data: { datasets: datasets() },
      options: {
        responsive: true, maintainAspectRatio: false, animation: false,
        scales: hw.costLatencyScales("TPOT"),
        plugins: { tooltip: { callbacks: { label: function (c) {
          return c.dataset.label + " #" + c.raw.rank + ": " + hw.fmtUsd(c.raw.y) + "/1M at " + hw.fmtTime(c.raw.x);
        } } } },
      },
    });
  }

  function initToggle() {
    document.querySelectorAll("[data-compare-latency]").forEach(function (b) {
      b.addEventListener("click", function () {
        latency = b.dataset.compareLatency;
        document.querySelectorAll("[data-compare-latency]").forEach(function (o) { o.setAttribute("aria-pressed", String(o === b)); });
        if (!chart) return;
        chart.options.scales.x.title.text = latency === "tpot_s" ? "TPOT" : "TTFT";
        chart.data.datasets = datasets();
        chart.update();
      });
    });
  }

  draw();
  initToggle();
})();
