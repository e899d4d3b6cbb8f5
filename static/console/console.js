// Progressive enhancement only: every page works without this file.
(function () {
  "use strict";

  // A fragment loaded into the shared <dialog> opens it as a modal (focus moves inside,
  // Escape closes it).
  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail.target;
    if (target && target.tagName === "DIALOG" && !target.open) {
      target.showModal();
    }
  });

  document.addEventListener("click", function (event) {
    var closer = event.target.closest("[data-close-dialog]");
    if (closer) {
      var dialog = closer.closest("dialog");
      if (dialog) {
        event.preventDefault();
        dialog.close();
      }
    }
  });

  document.addEventListener("change", function (event) {
    var select = event.target.closest("select[data-autosubmit]");
    if (select && select.form) {
      select.form.requestSubmit();
    }
  });
})();
