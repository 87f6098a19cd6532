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
      // Pushed by the server (one LISTEN connection per process), never polled: a request
      // this principal may see changed, or changes may have been missed. Changes that come
      // together reload the page once.
      var source = new EventSource(live.getAttribute("data-events"));
      var pending = null;
      var reload = function () {
        if (pending === null) {
          pending = setTimeout(function () { window.location.reload(); }, 250);
        }
      };
      source.addEventListener("request", reload);
      source.addEventListener("resync", reload);
      // The session ended (signed out elsewhere, or the account changed): the reload shows
      // the sign-in page.
      source.addEventListener("signed-out", function () {
        source.close();
        window.location.reload();
      });
    }
  });
})();
