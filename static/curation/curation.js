// Progressive enhancement only: without this file the excerpt is typed or pasted by hand.
(function () {
  "use strict";

  function enable() {
    document.querySelectorAll("[data-use-selection]").forEach(function (button) {
      button.hidden = false;
    });
  }

  // "Use selected text": copy the text selected inside this message into its excerpt field.
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-use-selection]");
    if (!button) {
      return;
    }
    var source = document.querySelector('[data-unit-text="' + button.dataset.useSelection + '"]');
    var input = document.getElementById(button.dataset.excerptInput);
    var selection = window.getSelection();
    if (!source || !input || !selection || selection.rangeCount === 0) {
      return;
    }
    var range = selection.getRangeAt(0);
    if (!source.contains(range.commonAncestorContainer)) {
      return;
    }
    input.value = selection.toString().trim();
    input.dispatchEvent(new Event("change", { bubbles: true }));
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", enable);
  } else {
    enable();
  }
})();
