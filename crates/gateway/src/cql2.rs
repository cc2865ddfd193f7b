//! CQL2-JSON filters for the STAC API: compiled once per request into an [`Expr`]
//! whose size is capped, then evaluated on each item in time bounded by that size.
//!
//! Caps (each refusal is a 400 naming the cap): nesting [`MAX_DEPTH`], operations
//! and operands [`MAX_NODES`], literals in all `in` lists [`MAX_LIST`], one
//! string [`MAX_STRING`] bytes, one `like` pattern [`MAX_PATTERN`] characters.
//! `like` is matched by [`Like::matches`] in O(pattern × value) steps at worst, with
//! no backtracking over earlier wildcards: a pattern of many `%` costs what a
//! pattern of one does.
//!
//! Times (`{"timestamp"}`, `{"date"}`, `{"interval"}`) must be valid dates: an
//! impossible one (`9999-99-99`) is a 400, not a filter that matches nothing.

use serde_json::Value;

/// Deepest nesting of operations.
pub const MAX_DEPTH: usize = 32;
/// Most operations and operands in one filter.
pub const MAX_NODES: usize = 2_000;
/// Most literals in all `in` lists of one filter together.
pub const MAX_LIST: usize = 10_000;
/// Longest string literal (bytes).
pub const MAX_STRING: usize = 1_024;
/// Longest `like` pattern (characters).
pub const MAX_PATTERN: usize = 256;

/// Operators understood.
pub const OPS: &[&str] = &[
    "and",
    "or",
    "not",
    "=",
    "<>",
    "<",
    "<=",
    ">",
    ">=",
    "in",
    "between",
    "isNull",
    "like",
    "t_intersects",
    "anyinteracts",
];

/// A compiled filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    IsNull(Operand),
    /// The item's time interval overlaps `[lo, hi]` (`None`: open).
    Overlaps(Option<Operand>, Option<Operand>),
    Between(Operand, Operand, Operand),
    In(Operand, Vec<Value>),
    Like(Operand, Like),
    Cmp(Cmp, Operand, Operand),
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A property of the item, or a literal (times already in RFC 3339).
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    Property(String),
    Literal(Value),
}

/// A refused filter: which cap or rule, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The cap's name (`depth`, `nodes`, `list`, `string`, `pattern`) or `syntax`.
    pub limit: &'static str,
    pub message: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "filter: {}", self.message)
    }
}

fn syntax(m: impl Into<String>) -> Refused {
    Refused {
        limit: "syntax",
        message: m.into(),
    }
}

/// Compiles a CQL2-JSON filter, refusing what cannot be evaluated or is too large.
pub fn compile(f: &Value) -> Result<Expr, Refused> {
    let mut c = Compiler {
        nodes: 0,
        listed: 0,
    };
    c.expr(f, 0)
}

struct Compiler {
    nodes: usize,
    listed: usize,
}

impl Compiler {
    fn count(&mut self, n: usize) -> Result<(), Refused> {
        self.nodes += n;
        if self.nodes > MAX_NODES {
            return Err(Refused {
                limit: "nodes",
                message: format!("more than {MAX_NODES} operations and operands"),
            });
        }
        Ok(())
    }

    fn expr(&mut self, f: &Value, depth: usize) -> Result<Expr, Refused> {
        if depth > MAX_DEPTH {
            return Err(Refused {
                limit: "depth",
                message: format!("nested more than {MAX_DEPTH} deep"),
            });
        }
        self.count(1)?;
        let Some(op) = f.get("op").and_then(Value::as_str) else {
            let mut shown = f.to_string();
            if shown.len() > 80 {
                let cut = (0..=80)
                    .rev()
                    .find(|&i| shown.is_char_boundary(i))
                    .unwrap_or(0);
                shown.truncate(cut);
                shown.push('…');
            }
            return Err(syntax(format!(
                "expected an operation {{\"op\", \"args\"}}, not {shown}"
            )));
        };
        if !OPS.contains(&op) {
            let op: String = op.chars().take(40).collect();
            return Err(syntax(format!(
                "operator {op:?} is not supported (supported: {})",
                OPS.join(", ")
            )));
        }
        let Some(args) = f.get("args").and_then(Value::as_array) else {
            return Err(syntax(format!("{op} needs \"args\" as a list")));
        };
        let want = match op {
            "and" | "or" => None,
            "not" | "isNull" => Some(1),
            "between" => Some(3),
            _ => Some(2),
        };
        if want.is_some_and(|n| args.len() != n) || (want.is_none() && args.is_empty()) {
            return Err(syntax(format!(
                "{op} takes {} arguments, not {}",
                want.map_or("some".to_string(), |n| n.to_string()),
                args.len()
            )));
        }
        Ok(match op {
            "and" | "or" => {
                let mut v = Vec::with_capacity(args.len().min(MAX_NODES));
                for a in args {
                    v.push(self.expr(a, depth + 1)?);
                }
                if op == "and" {
                    Expr::And(v)
                } else {
                    Expr::Or(v)
                }
            }
            "not" => Expr::Not(Box::new(self.expr(&args[0], depth + 1)?)),
            "isNull" => Expr::IsNull(self.operand(&args[0])?),
            "between" if is_datetime(&args[0]) => {
                Expr::Overlaps(Some(self.time(&args[1])?), Some(self.time(&args[2])?))
            }
            "between" => Expr::Between(
                self.operand(&args[0])?,
                self.operand(&args[1])?,
                self.operand(&args[2])?,
            ),
            "t_intersects" | "anyinteracts" => {
                self.operand(&args[0])?;
                match args[1].get("interval").and_then(Value::as_array) {
                    Some(iv) if iv.len() == 2 => {
                        let open = |v: &Value| v.is_null() || v.as_str() == Some("..");
                        let lo = if open(&iv[0]) {
                            None
                        } else {
                            Some(self.time(&iv[0])?)
                        };
                        let hi = if open(&iv[1]) {
                            None
                        } else {
                            Some(self.time(&iv[1])?)
                        };
                        Expr::Overlaps(lo, hi)
                    }
                    Some(_) => return Err(syntax("an interval has two ends")),
                    None => {
                        let t = self.time(&args[1])?;
                        Expr::Overlaps(Some(t.clone()), Some(t))
                    }
                }
            }
            "in" => {
                let Some(list) = args[1].as_array() else {
                    return Err(syntax("in takes a property and a list"));
                };
                self.listed += list.len();
                if self.listed > MAX_LIST {
                    return Err(Refused {
                        limit: "list",
                        message: format!("more than {MAX_LIST} values in its in lists"),
                    });
                }
                let v = self.operand(&args[0])?;
                let mut vals = Vec::with_capacity(list.len());
                for x in list {
                    match self.operand(x)? {
                        Operand::Literal(l) => vals.push(l),
                        Operand::Property(_) => {
                            return Err(syntax("an in list holds literals, not properties"))
                        }
                    }
                }
                Expr::In(v, vals)
            }
            "like" => {
                let v = self.operand(&args[0])?;
                let Some(p) = args[1].as_str() else {
                    return Err(syntax("like takes a property and a pattern string"));
                };
                self.count(1)?;
                Expr::Like(v, Like::new(p)?)
            }
            _ => {
                let c = match op {
                    "=" => Cmp::Eq,
                    "<>" => Cmp::Ne,
                    "<" => Cmp::Lt,
                    "<=" => Cmp::Le,
                    ">" => Cmp::Gt,
                    _ => Cmp::Ge,
                };
                Expr::Cmp(c, self.operand(&args[0])?, self.operand(&args[1])?)
            }
        })
    }

    fn string(&self, s: &str) -> Result<(), Refused> {
        if s.len() > MAX_STRING {
            return Err(Refused {
                limit: "string",
                message: format!("a string of {} bytes, more than {MAX_STRING}", s.len()),
            });
        }
        Ok(())
    }

    /// A time literal, checked and in RFC 3339.
    fn time(&mut self, a: &Value) -> Result<Operand, Refused> {
        self.count(1)?;
        let t = a
            .get("timestamp")
            .or_else(|| a.get("date"))
            .or(Some(a))
            .and_then(Value::as_str)
            .ok_or_else(|| syntax(format!("expected a time, not {}", short(a))))?;
        self.string(t)?;
        rfc3339(t)
            .map(|t| Operand::Literal(Value::String(t)))
            .ok_or_else(|| syntax(format!("{t:?} is not a valid date or time (RFC 3339)")))
    }

    fn operand(&mut self, a: &Value) -> Result<Operand, Refused> {
        self.count(1)?;
        if let Some(p) = a.get("property") {
            let p = p
                .as_str()
                .ok_or_else(|| syntax("a property's name is a string"))?;
            self.string(p)?;
            return Ok(Operand::Property(prop_name(p).to_string()));
        }
        if a.get("timestamp").or_else(|| a.get("date")).is_some() {
            self.nodes -= 1;
            return self.time(a);
        }
        match a {
            Value::String(s) => self.string(s)?,
            Value::Number(_) | Value::Bool(_) | Value::Null => {}
            _ => return Err(syntax(format!("unsupported operand {}", short(a)))),
        }
        Ok(Operand::Literal(a.clone()))
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() <= 80 {
        return s;
    }
    let cut = (0..=80).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
    format!("{}…", &s[..cut])
}

/// RFC 3339 (UTC) from the catalog's ISO-8601 times (`1950-01-01T00:00:00`): a
/// day past its month's end (360-day calendars) is moved to the month's last day.
pub(crate) fn rfc3339(s: &str) -> Option<String> {
    let s = s.trim().trim_end_matches('Z');
    let (date, time) = s.split_once('T').unwrap_or((s, "00:00:00"));
    let mut d = date.splitn(3, '-');
    let y: i64 = d.next()?.parse().ok()?;
    let m: u32 = d.next().map_or(Some(1), |x| x.parse().ok())?;
    let day: u32 = d.next().map_or(Some(1), |x| x.parse().ok())?;
    if !(0..=9999).contains(&y) || !(1..=12).contains(&m) || day == 0 {
        return None;
    }
    let last = u32::from(granary_packet::calendar::days_in_month(y, m as u8)?);
    let mut t = time.splitn(3, ':');
    let hh: u32 = t.next().map_or(Some(0), |x| x.parse().ok())?;
    let mm: u32 = t.next().map_or(Some(0), |x| x.parse().ok())?;
    let ss: f64 = t.next().map_or(Some(0.0), |x| x.parse().ok())?;
    if hh > 23 || mm > 59 || !(0.0..61.0).contains(&ss) {
        return None;
    }
    Some(format!(
        "{y:04}-{m:02}-{:02}T{hh:02}:{mm:02}:{:02}Z",
        day.min(last),
        ss as u32
    ))
}

/// The bare property name: `properties.cmip6:source_id` → `cmip6:source_id`.
pub fn prop_name(p: &str) -> &str {
    p.strip_prefix("properties.").unwrap_or(p)
}

fn is_datetime(a: &Value) -> bool {
    a.get("property")
        .and_then(Value::as_str)
        .is_some_and(|p| prop_name(p) == "datetime")
}

/// A compiled `like` pattern: `%` any run, `_` any one character, `\` escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Like {
    toks: Vec<Tok>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Char(char),
    One,
    Any,
}

impl Like {
    /// Compiles `pattern` (at most [`MAX_PATTERN`] characters).
    pub fn new(pattern: &str) -> Result<Like, Refused> {
        let n = pattern.chars().count();
        if n > MAX_PATTERN {
            return Err(Refused {
                limit: "pattern",
                message: format!("a like pattern of {n} characters, more than {MAX_PATTERN}"),
            });
        }
        let mut toks = Vec::with_capacity(n);
        let mut it = pattern.chars();
        while let Some(c) = it.next() {
            let t = match c {
                '%' => Tok::Any,
                '_' => Tok::One,
                '\\' => Tok::Char(it.next().unwrap_or('\\')),
                c => Tok::Char(c),
            };
            // Runs of `%` are one `%`.
            if !(t == Tok::Any && toks.last() == Some(&Tok::Any)) {
                toks.push(t);
            }
        }
        Ok(Like { toks })
    }

    /// Whether `s` matches. The greedy wildcard match: on a mismatch it returns
    /// only to the last `%` seen (never to earlier ones, whose choice cannot
    /// matter once a later `%` matched), so the work is at most
    /// pattern length × value length steps.
    pub fn matches(&self, s: &str) -> bool {
        let s: Vec<char> = s.chars().collect();
        let p = &self.toks;
        let (mut i, mut j) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        while i < s.len() {
            match p.get(j) {
                Some(Tok::Any) => {
                    star = Some((j, i));
                    j += 1;
                }
                Some(Tok::One) => {
                    i += 1;
                    j += 1;
                }
                Some(Tok::Char(c)) if *c == s[i] => {
                    i += 1;
                    j += 1;
                }
                _ => match star {
                    Some((sj, si)) => {
                        j = sj + 1;
                        i = si + 1;
                        star = Some((sj, si + 1));
                    }
                    None => return false,
                },
            }
        }
        p[j..].iter().all(|t| *t == Tok::Any)
    }
}

/// A property's value on the item (`null` when it has none).
fn property<'a>(name: &str, item: &'a Value) -> &'a Value {
    match name {
        "id" => &item["id"],
        "collection" => &item["collection"],
        _ => {
            let props = &item["properties"];
            match props.get(name) {
                Some(v) => v,
                None => props.get(format!("cmip6:{name}")).unwrap_or(&Value::Null),
            }
        }
    }
}

fn value<'a>(o: &'a Operand, item: &'a Value) -> &'a Value {
    match o {
        Operand::Property(p) => property(p, item),
        Operand::Literal(v) => v,
    }
}

/// Orders two values: numbers as numbers, strings as strings (RFC 3339 times
/// sort as strings), anything else not at all.
fn order(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => {
            let (x2, y2) = (rfc3339(x), rfc3339(y));
            match (x2, y2) {
                (Some(x), Some(y)) if x.len() == y.len() => Some(x.cmp(&y)),
                _ => Some(x.cmp(y)),
            }
        }
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

impl Expr {
    /// Evaluates the filter on an item (a STAC item document).
    pub fn eval(&self, item: &Value) -> bool {
        use std::cmp::Ordering::{Greater, Less};
        match self {
            Expr::And(v) => v.iter().all(|e| e.eval(item)),
            Expr::Or(v) => v.iter().any(|e| e.eval(item)),
            Expr::Not(e) => !e.eval(item),
            Expr::IsNull(o) => value(o, item).is_null(),
            Expr::Overlaps(lo, hi) => {
                let p = &item["properties"];
                let (s, e) = (&p["start_datetime"], &p["end_datetime"]);
                !s.is_null()
                    && lo
                        .as_ref()
                        .is_none_or(|lo| order(e, value(lo, item)) != Some(Less))
                    && hi
                        .as_ref()
                        .is_none_or(|hi| order(s, value(hi, item)) != Some(Greater))
            }
            Expr::Between(v, lo, hi) => {
                let v = value(v, item);
                matches!(order(v, value(lo, item)), Some(o) if o.is_ge())
                    && matches!(order(v, value(hi, item)), Some(o) if o.is_le())
            }
            Expr::In(v, list) => {
                let v = value(v, item);
                list.iter().any(|x| x == v)
            }
            Expr::Like(v, p) => value(v, item).as_str().is_some_and(|s| p.matches(s)),
            Expr::Cmp(op, a, b) => {
                let (a, b) = (value(a, item), value(b, item));
                if a.is_null() || b.is_null() {
                    return false;
                }
                let o = order(a, b);
                match op {
                    Cmp::Eq => a == b || o == Some(std::cmp::Ordering::Equal),
                    Cmp::Ne => a != b && o != Some(std::cmp::Ordering::Equal),
                    Cmp::Lt => o.is_some_and(|o| o.is_lt()),
                    Cmp::Le => o.is_some_and(|o| o.is_le()),
                    Cmp::Gt => o.is_some_and(|o| o.is_gt()),
                    Cmp::Ge => o.is_some_and(|o| o.is_ge()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain recursive matcher (exponential at worst), as the reference.
    fn reference(p: &[Tok], s: &[char]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some(Tok::Any) => (0..=s.len()).any(|i| reference(&p[1..], &s[i..])),
            Some(Tok::One) => !s.is_empty() && reference(&p[1..], &s[1..]),
            Some(Tok::Char(c)) => s.first() == Some(c) && reference(&p[1..], &s[1..]),
        }
    }

    #[test]
    fn like_agrees_with_the_reference_matcher() {
        let alphabet = ['a', 'b', '%', '_'];
        for _ in 0..20_000 {
            let p: String = (0..fastrand::usize(0..7))
                .map(|_| alphabet[fastrand::usize(..4)])
                .collect();
            let s: String = (0..fastrand::usize(0..9))
                .map(|_| ['a', 'b'][fastrand::usize(..2)])
                .collect();
            let l = Like::new(&p).unwrap();
            let sc: Vec<char> = s.chars().collect();
            assert_eq!(l.matches(&s), reference(&l.toks, &sc), "{p:?} on {s:?}");
        }
        assert!(Like::new("CMIP6.%.tas.%")
            .unwrap()
            .matches("CMIP6.CMIP.x.tas.gn"));
        assert!(Like::new("50\\%").unwrap().matches("50%"));
        assert!(!Like::new("50\\%").unwrap().matches("500"));
        assert!(Like::new("ü_").unwrap().matches("üx"));
    }

    #[test]
    fn many_wildcards_cost_what_one_does() {
        // The pattern that pinned a core with the backtracking matcher:
        // a% repeated, against a long value that nearly matches. The greedy
        // matcher's steps are bounded by pattern × value; count them by
        // running it on a value 2,000 characters long: it returns.
        let p = "%a".repeat(120) + "b";
        let l = Like::new(&p).unwrap();
        let s = "a".repeat(2_000);
        assert!(!l.matches(&s));
        assert!(l.matches(&(s + "b")));
    }

    fn f(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn caps_are_refused_by_name() {
        let deep = (0..40).fold(
            r#"{"op":"=","args":[{"property":"a"},"x"]}"#.to_string(),
            |acc, _| format!(r#"{{"op":"not","args":[{acc}]}}"#),
        );
        assert_eq!(compile(&f(&deep)).unwrap_err().limit, "depth");
        let wide = format!(
            r#"{{"op":"or","args":[{}]}}"#,
            vec![r#"{"op":"=","args":[{"property":"a"},"x"]}"#; 1000].join(",")
        );
        assert_eq!(compile(&f(&wide)).unwrap_err().limit, "nodes");
        let list = format!(
            r#"{{"op":"in","args":[{{"property":"a"}},[{}]]}}"#,
            vec!["1"; MAX_LIST + 1].join(",")
        );
        assert_eq!(compile(&f(&list)).unwrap_err().limit, "list");
        let long = format!(
            r#"{{"op":"=","args":[{{"property":"a"}},"{}"]}}"#,
            "x".repeat(MAX_STRING + 1)
        );
        assert_eq!(compile(&f(&long)).unwrap_err().limit, "string");
        let pat = format!(
            r#"{{"op":"like","args":[{{"property":"a"}},"{}"]}}"#,
            "%".repeat(MAX_PATTERN + 1)
        );
        assert_eq!(compile(&f(&pat)).unwrap_err().limit, "pattern");
        for bad in [
            r#"{"op":"=","args":[{"property":"datetime"},{"timestamp":"9999-99-99"}]}"#,
            r#"{"op":"between","args":[{"property":"datetime"},"notadate","2000-01-01"]}"#,
            r#"{"op":"t_intersects","args":[{"property":"datetime"},{"interval":["2000-13-01",".."]}]}"#,
            r#"{"op":"in","args":[{"property":"a"},[{"property":"b"}]]}"#,
        ] {
            assert_eq!(compile(&f(bad)).unwrap_err().limit, "syntax", "{bad}");
        }
    }
}
