// duetime dashboard: refresh each [data-live] region in place every few seconds (no reload).
// The server keeps each read for a second, so polling pages cost the store little.
(function () {
  "use strict";
  var every = parseInt(document.body.getAttribute("data-refresh-ms"), 10) || 5000;
  function refresh() {
    if (document.hidden) { return; }
    var regions = document.querySelectorAll("[data-live]");
    Array.prototype.forEach.call(regions, function (region) {
      fetch(region.getAttribute("data-live"), { credentials: "same-origin" })
        .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.text(); })
        .then(function (html) {
          region.innerHTML = html;
          region.setAttribute("data-refreshed", String(Date.now()));
        })
        .catch(function () { region.setAttribute("data-stale", "1"); });
    });
  }
  window.setInterval(refresh, Math.max(every, 1000));
})();
