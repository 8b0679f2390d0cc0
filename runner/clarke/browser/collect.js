// Runs in the loaded page (Selenium's executeAsyncScript, after the load event): waits
// for the page to settle, then returns the browser's own timing entries. Times are
// milliseconds from the navigation's start (performance.timeOrigin).
const done = arguments[arguments.length - 1];
const settleMs = arguments[0];
// The page's largest elements (paths, as the page's manifest names them), when known.
const candidates = new Set(arguments.length > 2 ? arguments[1] : []);
let lcp = null;
let waiting = false; // after the load event's frames, until finish()
let finished = false;
try {
  new PerformanceObserver((list) => {
    const entries = list.getEntries();
    lcp = entries[entries.length - 1];
    if (waiting && settled()) finish();
  }).observe({ type: "largest-contentful-paint", buffered: true });
} catch (e) {
  lcp = { error: String(e) };
}
// A browser reports a new LCP entry only for an element larger than the last one's, so
// once one of the page's largest elements has its entry (and the first contentful paint
// is there), no later paint can change FCP or LCP: the rest of the settle wait is idle.
function settled() {
  if (!candidates.size || !lcp || lcp.error || !lcp.url) return false;
  let path;
  try {
    path = new URL(lcp.url).pathname.replace(/^\/+/, "");
  } catch (e) {
    return false;
  }
  const fcp = performance.getEntriesByType("paint").some((p) => p.name === "first-contentful-paint");
  return fcp && candidates.has(path);
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
  if (finished) return;
  finished = true;
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
  // Two frames after load (the load event has ended), then until the page's largest
  // element has painted, or for a margin where that is not known or not seen.
  requestAnimationFrame(() => requestAnimationFrame(() => {
    waiting = true;
    if (settled()) finish();
    else setTimeout(finish, settleMs);
  }));
}
if (document.readyState === "complete") afterFrames();
else window.addEventListener("load", afterFrames);
