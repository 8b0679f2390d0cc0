//! A script put into every replayed HTML document, before any of the page's own, so that
//! a page's scripts see the same clock and the same random numbers on every load (as
//! WebPageReplay's deterministic.js does; this one is Clarke's own):
//!
//! - `Math.random()` returns a seeded sequence (mulberry32), restarted in each document;
//! - `Date.now()` and `new Date()` start at the time the site was recorded and advance
//!   with the page's own clock (`performance.now()`), so a script that times something
//!   still sees time pass; `new Date(x)` with arguments is untouched.
//!
//! The script goes right after the `<head ...>` tag (else after `<html ...>`, else at
//! the start). The same bytes are served on every protocol.

/// The script for a seed and a start time (Unix ms).
pub fn script(seed: u64, time_ms: u64) -> String {
    let seed32 = (seed ^ (seed >> 32)) as u32;
    format!(
        "<script>/* clarke replay: deterministic Date and Math.random, seed {seed} */\
(function(){{var s={seed32};Math.random=function(){{s=(s+0x6D2B79F5)>>>0;\
var t=Math.imul(s^(s>>>15),s|1);t^=t+Math.imul(t^(t>>>7),t|61);\
return((t^(t>>>14))>>>0)/4294967296;}};\
var R=Date,T={time_ms},P=self.performance;\
function now(){{return T+Math.floor(P?P.now():0);}}\
function D(){{if(!new.target){{return new R(now()).toString();}}\
return arguments.length?new R(...arguments):new R(now());}}\
D.prototype=R.prototype;D.now=now;D.parse=R.parse;D.UTC=R.UTC;\
Object.defineProperty(R.prototype,'constructor',{{value:D,writable:true,configurable:true}});\
self.Date=D;}})();</script>"
    )
}

fn find_tag_end(html: &[u8], tag: &[u8]) -> Option<usize> {
    // `<head` followed by `>` or whitespace (not `<header`), case-insensitively.
    let lower: Vec<u8> = html.iter().map(u8::to_ascii_lowercase).collect();
    let mut from = 0;
    while let Some(pos) = find(&lower[from..], tag).map(|p| p + from) {
        let after = pos + tag.len();
        match lower.get(after) {
            Some(b'>') => return Some(after + 1),
            Some(c) if c.is_ascii_whitespace() => {
                return find(&lower[after..], b">").map(|p| after + p + 1);
            }
            _ => from = after,
        }
    }
    None
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `html` with the script inserted.
pub fn inject(html: &[u8], script: &str) -> Vec<u8> {
    let at = find_tag_end(html, b"<head")
        .or_else(|| find_tag_end(html, b"<html"))
        .unwrap_or(0);
    let mut out = Vec::with_capacity(html.len() + script.len());
    out.extend_from_slice(&html[..at]);
    out.extend_from_slice(script.as_bytes());
    out.extend_from_slice(&html[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goes_after_the_head_tag_else_the_html_tag_else_first() {
        let s = "<script>X</script>";
        assert_eq!(
            inject(b"<!doctype html><HTML lang=en><Head class=a><title>t", s),
            b"<!doctype html><HTML lang=en><Head class=a><script>X</script><title>t".to_vec()
        );
        assert_eq!(
            inject(b"<html><header>h</header>", s),
            b"<html><script>X</script><header>h</header>".to_vec()
        );
        assert_eq!(inject(b"<p>plain", s), b"<script>X</script><p>plain".to_vec());
    }

    #[test]
    fn the_script_carries_its_seed_and_time() {
        let a = script(42, 1_714_557_600_000);
        assert!(a.contains("var s=42;") && a.contains("T=1714557600000"));
        assert_eq!(a, script(42, 1_714_557_600_000));
        assert_ne!(a, script(43, 1_714_557_600_000));
    }
}
