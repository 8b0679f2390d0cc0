//! Which recorded exchange answers a request: the same method and origin, then
//!
//! 1. **exact**: the same path and query;
//! 2. **query**: the same path, the query that shares the most `key=value` pairs with
//!    the request's (a page's scripts add cache busters and timestamps);
//! 3. **prefix**: the recorded path and query sharing the longest prefix with the
//!    request's, where that prefix covers the request's directory (its path up to the
//!    last `/`) and more: `/img/hero-8000.jpg` finds `/img/hero-800.jpg`, while
//!    `/favicon.ico` finds neither `/` nor `/img/x.png`.
//!
//! Ties go to the exchange recorded first. A HEAD request is answered from a GET
//! exchange where no HEAD was recorded. No I/O: a table built once, looked up per
//! request.

use std::collections::HashMap;

use serde::Serialize;

/// How a request found its exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum How {
    Exact,
    Query,
    Prefix,
}

impl How {
    pub fn name(self) -> &'static str {
        match self {
            How::Exact => "exact",
            How::Query => "query",
            How::Prefix => "prefix",
        }
    }
}

#[derive(Debug)]
struct Candidate {
    path: String,
    query: Option<String>,
    index: usize,
}

/// The recorded exchanges by (method, authority), in recorded order.
#[derive(Debug, Default)]
pub struct Index {
    by_key: HashMap<(String, String), Vec<Candidate>>,
}

/// `path?query` split at the first `?`.
pub fn split(path_and_query: &str) -> (&str, Option<&str>) {
    match path_and_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_and_query, None),
    }
}

fn pairs(query: Option<&str>) -> Vec<&str> {
    let mut v: Vec<&str> = query.unwrap_or("").split('&').filter(|p| !p.is_empty()).collect();
    v.sort_unstable();
    v
}

/// `key=value` pairs two queries share, counted as multisets.
fn shared_pairs(a: Option<&str>, b: Option<&str>) -> usize {
    let (a, b) = (pairs(a), pairs(b));
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(b[j]) {
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
        }
    }
    n
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

impl Index {
    /// Adds exchange `index` (in recorded order: the first added wins a tie).
    pub fn add(&mut self, method: &str, authority: &str, path_and_query: &str, index: usize) {
        let (path, query) = split(path_and_query);
        self.by_key
            .entry((method.to_owned(), authority.to_ascii_lowercase()))
            .or_default()
            .push(Candidate {
                path: path.to_owned(),
                query: query.map(str::to_owned),
                index,
            });
    }

    /// The exchange for a request, and how it was found; `None` is a miss.
    pub fn find(&self, method: &str, authority: &str, path_and_query: &str) -> Option<(usize, How)> {
        let key = (method.to_owned(), authority.to_ascii_lowercase());
        let found = self.by_key.get(&key).and_then(|c| Self::among(c, path_and_query));
        if found.is_none() && method == "HEAD" {
            return self.find("GET", authority, path_and_query);
        }
        found
    }

    fn among(candidates: &[Candidate], path_and_query: &str) -> Option<(usize, How)> {
        let (path, query) = split(path_and_query);
        if let Some(c) = candidates
            .iter()
            .find(|c| c.path == path && c.query.as_deref() == query)
        {
            return Some((c.index, How::Exact));
        }
        let mut best: Option<(&Candidate, usize)> = None;
        for c in candidates.iter().filter(|c| c.path == path) {
            let n = shared_pairs(c.query.as_deref(), query);
            if best.is_none_or(|(_, m)| n > m) {
                best = Some((c, n));
            }
        }
        if let Some((c, _)) = best {
            return Some((c.index, How::Query));
        }
        let dir = path.rfind('/').map_or(0, |i| i + 1);
        let mut best: Option<(&Candidate, usize)> = None;
        for c in candidates {
            let recorded = match &c.query {
                Some(q) => format!("{}?{q}", c.path),
                None => c.path.clone(),
            };
            let n = common_prefix(&recorded, path_and_query);
            if n > dir && best.is_none_or(|(_, m)| n > m) {
                best = Some((c, n));
            }
        }
        best.map(|(c, _)| (c.index, How::Prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> Index {
        let mut i = Index::default();
        for (n, (m, a, p)) in [
            ("GET", "www.a.test", "/"),
            ("GET", "www.a.test", "/app.js?v=1&t=100"),
            ("GET", "www.a.test", "/app.js?v=2&t=100"),
            ("GET", "www.a.test", "/img/hero-1200.jpg"),
            ("GET", "www.a.test", "/img/hero-800.jpg"),
            ("POST", "api.b.test", "/collect?id=7"),
            ("GET", "cdn.c.test:8443", "/x.css"),
            ("GET", "www.a.test", "/"),
        ]
        .into_iter()
        .enumerate()
        {
            i.add(m, a, p, n);
        }
        i
    }

    #[test]
    fn exact_then_query_then_prefix_then_miss() {
        let i = index();
        assert_eq!(i.find("GET", "www.a.test", "/"), Some((0, How::Exact)));
        assert_eq!(
            i.find("GET", "WWW.A.TEST", "/app.js?v=2&t=100"),
            Some((2, How::Exact))
        );
        // The query sharing the most pairs: v=2 with another t.
        assert_eq!(
            i.find("GET", "www.a.test", "/app.js?t=999&v=2"),
            Some((2, How::Query))
        );
        // No pair shared: the first recorded.
        assert_eq!(i.find("GET", "www.a.test", "/app.js?cb=1"), Some((1, How::Query)));
        assert_eq!(i.find("GET", "www.a.test", "/app.js"), Some((1, How::Query)));
        // Same directory, the longest shared prefix.
        assert_eq!(
            i.find("GET", "www.a.test", "/img/hero-8000.jpg"),
            Some((4, How::Prefix))
        );
        assert_eq!(
            i.find("GET", "www.a.test", "/img/hero.png"),
            Some((3, How::Prefix))
        );
        assert_eq!(i.find("GET", "www.a.test", "/img/other.png"), None);
        assert_eq!(i.find("GET", "www.a.test", "/favicon.ico"), None);
        // Another directory, another origin, another method: misses.
        assert_eq!(i.find("GET", "www.a.test", "/css/site.css"), None);
        assert_eq!(i.find("GET", "www.b.test", "/"), None);
        assert_eq!(i.find("PUT", "www.a.test", "/"), None);
        assert_eq!(i.find("GET", "api.b.test", "/collect?id=7"), None);
        assert_eq!(
            i.find("POST", "api.b.test", "/collect?id=8"),
            Some((5, How::Query))
        );
        assert_eq!(i.find("GET", "cdn.c.test:8443", "/x.css"), Some((6, How::Exact)));
        assert_eq!(i.find("GET", "cdn.c.test", "/x.css"), None);
    }

    #[test]
    fn head_is_answered_from_get() {
        let i = index();
        assert_eq!(
            i.find("HEAD", "www.a.test", "/img/hero-800.jpg"),
            Some((4, How::Exact))
        );
    }

    #[test]
    fn shared_pairs_are_a_multiset_intersection() {
        assert_eq!(shared_pairs(Some("a=1&b=2&a=1"), Some("a=1&a=1&c=3")), 2);
        assert_eq!(shared_pairs(None, Some("a=1")), 0);
        assert_eq!(split("/a?b?c"), ("/a", Some("b?c")));
    }
}
