// memwarden /me: the page's only script. It follows a deletion's progress by fetching the small
// status fragment once a second until the receipt is final (verified or failed). Without scripts,
// the page refreshes itself instead (a <noscript> meta refresh).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const region = document.querySelector("[data-poll]");
  if (!region) return;
  const url = region.getAttribute("data-poll");
  const final = () => region.querySelector("[data-final='true']") !== null;
  const tick = async () => {
    if (final()) return;
    try {
      const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (response.ok || response.status === 401 || response.status === 404) {
        region.innerHTML = await response.text();
      }
    } catch (_) {
      // the network blinked: try again on the next tick
    }
    if (!final()) window.setTimeout(tick, 1000);
  };
  window.setTimeout(tick, 1000);
});
