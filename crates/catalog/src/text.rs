//! Free-text tokenisation, shared by both back ends so they agree on what matches.
//!
//! A word is a run of alphanumeric characters (Unicode), lower-cased, cut to
//! [`MAX_TOKEN_CHARS`]. Documents are stored as their distinct words joined by spaces,
//! and user text is turned into the same words, so no user character ever reaches the
//! FTS5 / tsquery syntax except as the inside of a quoted word.

use std::collections::HashSet;

/// Longer words are cut to this many characters (on both sides, so matching stays exact).
pub const MAX_TOKEN_CHARS: usize = 64;

/// The words of `s`, in order, lower-cased and cut.
pub fn words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .filter_map(|w| {
            if w.is_ascii() {
                // The common case: ASCII letters and digits, one byte per character.
                let mut t = w[..w.len().min(MAX_TOKEN_CHARS)].to_string();
                t.make_ascii_lowercase();
                return Some(t);
            }
            let t: String = w
                .chars()
                .take(MAX_TOKEN_CHARS)
                .flat_map(char::to_lowercase)
                .filter(|c| c.is_alphanumeric())
                .collect();
            (!t.is_empty()).then_some(t)
        })
}

/// The distinct words of all `parts`, joined by single spaces: the indexed body.
pub fn body<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut seen: Vec<String> = Vec::new();
    let mut set: HashSet<String> = HashSet::new();
    let mut out = String::new();
    for p in parts {
        for w in words(p) {
            // Few words (the usual record): a linear scan beats hashing each one.
            let new = if set.is_empty() && seen.len() < 48 {
                !seen.contains(&w)
            } else {
                if set.is_empty() {
                    set.extend(seen.drain(..));
                }
                !set.contains(&w)
            };
            if new {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(&w);
                if set.is_empty() {
                    seen.push(w);
                } else {
                    set.insert(w);
                }
            }
        }
    }
    out
}

/// The distinct words of a user query.
pub fn query_words(s: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    words(s).filter(|w| seen.insert(w.clone())).collect()
}

/// An FTS5 MATCH expression: every word as a quoted string token, implicitly ANDed.
pub fn fts5_match(words: &[String]) -> String {
    words
        .iter()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_becomes_plain_words() {
        let w = query_words("'; DROP TABLE records; -- \"x\" NEAR(a b) -c* col:tas");
        assert_eq!(
            w,
            ["drop", "table", "records", "x", "near", "a", "b", "c", "col", "tas"]
        );
        assert_eq!(fts5_match(&w[..2]), "\"drop\" \"table\"");
        assert!(query_words("*** -- \"").is_empty());
        assert_eq!(body(["tas tas", "TAS Amon"]), "tas amon");
    }
}
