// Live updates and countdowns. Pages work without this file.
(function () {
  "use strict";
  function tick() {
    document.querySelectorAll("[data-expires]").forEach(function (el) {
      var left = Math.floor((Date.parse(el.getAttribute("data-expires")) - Date.now()) / 1000);
      if (left <= 0) { el.textContent = "expired"; return; }
      var h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
      el.textContent = (h ? h + " h " : "") + m + " min " + (h ? "" : s + " s");
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    tick();
    setInterval(tick, 1000);
    var live = document.getElementById("live");
    if (live && window.EventSource) {
      var source = new EventSource(live.getAttribute("data-events"));
      source.addEventListener("changed", function () { window.location.reload(); });
      // The session ended (signed out elsewhere, or the account changed): the reload shows
      // the sign-in page.
      source.addEventListener("signed-out", function () {
        source.close();
        window.location.reload();
      });
    }
  });
})();
