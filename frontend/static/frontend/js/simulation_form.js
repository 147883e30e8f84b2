/* The simulation form: shows the fields of the chosen arrival process and length distributions (without
   scripts every field shows, and the server reads only those that apply). Validation is the server's. */
(function () {
  "use strict";

  function init() {
    var form = document.getElementById("simulation-form");
    if (!form) return;

    // Each [data-show] wrapper lists the choices it belongs to: "poisson gamma", "prompt-lognormal", ...
    function update() {
      var arrivals = (form.querySelector("input[name=arrivals]:checked") || {}).value || "poisson";
      var shown = [arrivals];
      form.querySelectorAll("select[data-lengths]").forEach(function (select) { shown.push(select.dataset.lengths + "-" + select.value); });
      form.querySelectorAll("[data-show]").forEach(function (el) {
        var on = el.dataset.show.split(" ").some(function (choice) { return shown.indexOf(choice) >= 0; });
        el.hidden = !on;
        el.querySelectorAll("input, select").forEach(function (input) { input.disabled = !on; });
      });
    }
    form.querySelectorAll("input[name=arrivals], select[data-lengths]").forEach(function (el) { el.addEventListener("change", update); });
    update();

    // A simulation of a few thousand requests takes a moment: say so and stop double submits.
    form.addEventListener("submit", function () {
      var button = document.getElementById("simulation-submit");
      if (!button) return;  // an anonymous visitor's form has a sign-in link instead
      button.disabled = true; button.textContent = "Simulating…"; form.setAttribute("aria-busy", "true");
    });
    window.addEventListener("pageshow", function () {  // a page restored from the back/forward cache is usable again
      var button = document.getElementById("simulation-submit");
      if (!button) return;
      button.disabled = false; button.textContent = "Simulate"; form.removeAttribute("aria-busy");
    });
    var firstInvalid = form.querySelector("[aria-invalid=true]");
    if (firstInvalid) firstInvalid.focus();
  }

  document.addEventListener("DOMContentLoaded", init);
})();
