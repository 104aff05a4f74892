// A link to an equation (or any target) inside a folded box opens the box.
// The derivations are dropdown admonitions, folded by sphinx-togglebutton (class
// "toggle-hidden", opened by its button); solutions and hidden cells are <details>.
// On load, on every change of the URL's fragment, and on a click on a link to the
// current fragment (no hashchange then), every folded ancestor of the target is
// opened and the target scrolled into view.
(function () {
  "use strict";

  function targetOf(hash) {
    if (!hash || hash.length < 2) return null;
    var id;
    try {
      id = decodeURIComponent(hash.slice(1));
    } catch (e) {
      id = hash.slice(1);
    }
    return document.getElementById(id);
  }

  function openAround(el) {
    var opened = false;
    for (var node = el; node && node !== document.body; node = node.parentElement) {
      if (node.tagName === "DETAILS" && !node.open) {
        node.open = true;
        opened = true;
      }
      if (node.classList && node.classList.contains("toggle-hidden")) {
        var button = node.querySelector(":scope > .admonition-title .toggle-button") ||
          document.getElementById("button-" + node.id);
        if (button) {
          button.click();
        } else {
          node.classList.remove("toggle-hidden");
        }
        opened = true;
      }
    }
    return opened;
  }

  function reveal() {
    var el = targetOf(window.location.hash);
    if (el && openAround(el)) {
      el.scrollIntoView({ block: "center" });
    }
  }

  window.addEventListener("hashchange", reveal);
  // after sphinx-togglebutton has folded the boxes (it runs on DOMContentLoaded)
  window.addEventListener("load", function () {
    window.setTimeout(reveal, 0);
  });
  document.addEventListener("click", function (ev) {
    var a = ev.target.closest && ev.target.closest("a[href*='#']");
    if (!a || a.hash !== window.location.hash) return;
    if (a.pathname !== window.location.pathname) return;
    window.setTimeout(reveal, 0);
  });
})();
