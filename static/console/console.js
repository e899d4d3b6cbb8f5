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

  // Filters fold away on a phone so the list comes first; on a wider screen they stay open.
  // Without script they are open everywhere.
  function foldOnPhone() {
    if (!window.matchMedia("(max-width: 700px)").matches) {
      return;
    }
    document.querySelectorAll("details[data-fold-on-phone][open]").forEach(function (details) {
      details.open = false;
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", foldOnPhone);
  } else {
    foldOnPhone();
  }

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

  // "Use selected text" (the thread picker): copy the text selected inside one message into
  // its excerpt field. Without script the excerpt is typed or pasted, so the buttons start hidden.
  function showSelectionButtons() {
    document.querySelectorAll("[data-use-selection]").forEach(function (button) {
      button.hidden = false;
    });
  }

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

  // --- review flow: focus after a swap, keyboard shortcuts ------------------------------------

  // After htmx swaps in an error or a confirmation, focus moves to it (and its role="alert" or
  // role="status" announces it). A swap that only refreshes something (the live checklist, a
  // list) marks nothing and leaves focus where the reviewer is typing.
  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail.target;
    if (target && !target.isConnected && target.id) {
      target = document.getElementById(target.id);
    }
    if (!target || !target.isConnected || target.tagName === "DIALOG") {
      return;
    }
    var spot = target.matches("[role=alert], [data-focus-after-swap]")
      ? target
      : target.querySelector("[role=alert], [data-focus-after-swap]");
    if (!spot) {
      return;
    }
    if (!spot.hasAttribute("tabindex")) {
      spot.setAttribute("tabindex", "-1");
    }
    spot.focus();
  });

  function typingIn(element) {
    if (!element || !element.tagName) {
      return false;
    }
    var tag = element.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || element.isContentEditable;
  }

  // Clicking an evidence item (not one of its controls) focuses it, so "c" knows which one.
  document.addEventListener("click", function (event) {
    var evidence = event.target.closest("[data-checkable]");
    if (evidence && !event.target.closest("a, button, input, textarea, select, label")) {
      evidence.focus();
    }
  });

  function moveInQueue(step) {
    var items = Array.prototype.slice.call(document.querySelectorAll("[data-queue-item]"));
    if (items.length === 0) {
      return false;
    }
    var index = items.indexOf(document.activeElement);
    var next = index < 0 ? (step > 0 ? 0 : items.length - 1) : index + step;
    if (next >= 0 && next < items.length) {
      items[next].focus();
    }
    return true;
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.isComposing || event.ctrlKey || event.metaKey || event.altKey) {
      return;
    }
    if (typingIn(event.target) || typingIn(document.activeElement)) {
      return;
    }
    var key = event.key;
    if (key === "?") {
      var help = document.getElementById("shortcut-help");
      if (help) {
        help.open = !help.open;
        // The help sits below the queue links, often under the fold: bring it into view.
        if (help.open) {
          help.scrollIntoView({ block: "nearest" });
        }
        event.preventDefault();
      }
      return;
    }
    if (event.shiftKey) {
      return;
    }
    if (key === "j" || key === "k") {
      if (moveInQueue(key === "j" ? 1 : -1)) {
        event.preventDefault();
        return;
      }
      var link = document.querySelector('[data-shortcut="' + key + '"]');
      if (link) {
        event.preventDefault();
        window.location.assign(link.href);
      }
    } else if (key === "c") {
      var evidence = document.activeElement && document.activeElement.closest("[data-checkable]");
      var form = evidence && evidence.querySelector("[data-check-form]");
      if (form) {
        event.preventDefault();
        form.requestSubmit();
      } else if (!evidence && document.querySelector("[data-unblocks]")) {
        // A case that cannot be approved as it stands: no check helps, so "c" goes to what does
        // (send it back for changes) instead of the first observation.
        var unblock = document.querySelector("[data-unblocks]");
        if (unblock) {
          event.preventDefault();
          var details = unblock.closest("details");
          if (details) {
            details.open = true;
          }
          unblock.scrollIntoView({ block: "nearest" });
          unblock.focus();
        }
      } else if (!evidence) {
        // Nothing focused yet: the first press goes to the first unchecked evidence item, the
        // next marks it (a check is a write, so the reviewer sees which item first).
        var first = document.querySelector("[data-checkable]");
        if (first) {
          event.preventDefault();
          first.scrollIntoView({ block: "nearest" });
          first.focus();
        }
      }
    } else if (key === "a" || key === "r") {
      var button = document.querySelector('[data-shortcut-target="' + key + '"]');
      if (button) {
        event.preventDefault();
        button.scrollIntoView({ block: "nearest" });
        button.focus();
      }
    }
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", showSelectionButtons);
  } else {
    showSelectionButtons();
  }
  // Copy buttons next to ids (names, not hashes): hidden without script, since copying needs it.
  function showCopyButtons(root) {
    (root || document).querySelectorAll("button.copy-id[data-copy]").forEach(function (button) {
      button.hidden = false;
    });
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.appendChild(area);
    area.select();
    var ok = document.execCommand("copy");
    document.body.removeChild(area);
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button.copy-id[data-copy]");
    if (!button) {
      return;
    }
    event.preventDefault();
    var label = button.dataset.label || button.textContent;
    button.dataset.label = label;
    copyText(button.dataset.copy).then(function () {
      button.classList.add("copied");
      button.textContent = button.dataset.copiedLabel || "\u2713";
      window.setTimeout(function () {
        button.classList.remove("copied");
        button.textContent = label;
      }, 1500);
    }, function () {});
  });

  document.addEventListener("htmx:load", function (event) {
    showCopyButtons(event.detail && event.detail.elt);
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { showCopyButtons(document); });
  } else {
    showCopyButtons(document);
  }
})();
