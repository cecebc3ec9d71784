// hookbox console: optional conveniences only; every page works without this file.
// It reads attributes and sets text or attributes through the DOM, never markup.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // <time datetime="…">: the local time as a tooltip
  document.querySelectorAll("time[datetime]").forEach(function (el) {
    var at = new Date(el.getAttribute("datetime"));
    if (!isNaN(at.getTime())) {
      el.setAttribute("title", at.toLocaleString());
    }
  });
  // a button that toggles line wrapping of the <pre> it names
  document.querySelectorAll("button[data-wrap]").forEach(function (button) {
    var target = document.getElementById(button.getAttribute("data-wrap"));
    if (!target) {
      return;
    }
    button.hidden = false;
    button.addEventListener("click", function () {
      target.classList.toggle("wrap");
    });
  });
});
