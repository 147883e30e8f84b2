/* A queued or running plan's (or fleet plan's, or simulation's) page: asks the plan's API address every few seconds and reloads
   the page (which then shows the results, or why it failed) once the search has ended. */
(function () {
  "use strict";
  var box = document.getElementById("plan-status");
  if (!box || !window.fetch) return;
  var url = box.dataset.statusUrl, bar = document.getElementById("plan-progress"), text = document.getElementById("plan-progress-text");
  // A fleet's page names what its progress counts (data-progress-what); a plan's counts configurations.
  var what = box.dataset.progressWhat || "of the configurations evaluated";
  // A simulation is one step (data-progress="none"): its bar stays indeterminate, with no share to show.
  var stepless = box.dataset.progress === "none";
  var delay = 2000;

  function show(plan) {
    if (plan.status === "running") {
      if (bar && !stepless) bar.value = plan.progress;
      if (text) text.textContent = stepless ? "Running." : "Running: " + (plan.progress * 100).toFixed(1) + "% " + what + ".";
    }
  }

  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (plan) {
        if (plan && (plan.status === "done" || plan.status === "failed")) { window.location.reload(); return; }
        if (plan) show(plan);
        delay = Math.min(delay * 1.25, 10000);
        window.setTimeout(poll, delay);
      })
      .catch(function () { window.setTimeout(poll, 10000); });
  }
  window.setTimeout(poll, delay);
})();
