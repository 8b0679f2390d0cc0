// Runs in the loaded page (Selenium's executeAsyncScript, after the load event): waits
// for the page to settle, then returns the browser's own timing entries. Times are
// milliseconds from the navigation's start (performance.timeOrigin).
const done = arguments[arguments.length - 1];
const settleMs = arguments[0];
let lcp = null;
try {
  new PerformanceObserver((list) => {
    const entries = list.getEntries();
    lcp = entries[entries.length - 1];
  }).observe({ type: "largest-contentful-paint", buffered: true });
} catch (e) {
  lcp = { error: String(e) };
}
// A browser's own error page instead of the page (Chromium: chrome-error:, with the
// net error's name on it; Firefox: about:neterror?e=...).
function errorPage() {
  if (location.protocol === "chrome-error:") {
    const code = document.querySelector(".error-code");
    return (code && code.textContent.trim()) || "chrome-error";
  }
  return location.protocol === "about:" ? document.documentURI : null;
}
function finish() {
  const nav = performance.getEntriesByType("navigation")[0];
  const fcp = performance.getEntriesByType("paint").find((p) => p.name === "first-contentful-paint");
  done({
    timeOrigin: performance.timeOrigin,
    errorPage: errorPage(),
    navigation: nav ? nav.toJSON() : null,
    fcp: fcp ? fcp.startTime : null,
    lcp: lcp && !lcp.error ? {
      startTime: lcp.startTime, renderTime: lcp.renderTime, loadTime: lcp.loadTime,
      size: lcp.size, url: lcp.url, id: lcp.id,
      element: lcp.element ? (lcp.element.id || lcp.element.tagName) : null,
    } : lcp,
    resources: performance.getEntriesByType("resource").map((r) => r.toJSON()),
  });
}
function afterFrames() {
  // Two frames after load, plus a margin, so the last LCP candidate has been painted.
  requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(finish, settleMs)));
}
if (document.readyState === "complete") afterFrames();
else window.addEventListener("load", afterFrames);
