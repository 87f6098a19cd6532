// Starts Swagger UI on /api/docs. A file of its own, not an inline script: the app's
// Content-Security-Policy allows scripts from this site only.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var root = document.getElementById("swagger-ui");
    window.ui = window.SwaggerUIBundle({
      url: root.getAttribute("data-openapi-url"),
      domNode: root,
      deepLinking: true,
      presets: [window.SwaggerUIBundle.presets.apis],
      layout: "BaseLayout"
    });
  });
})();
