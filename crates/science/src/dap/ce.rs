//! DAP2 constraint expressions: projections (`a,b.c`) with hyperslabs on every
//! dimension (`[i]`, `[start:stop]`, `[start:stride:stop]`, stop inclusive),
//! resolved against a [`Model`] into [`Pick`]s. Selections (`&a>1`) and server
//! functions are refused. Bounded: the expression's length, the number of
//! projections, names per projection (a Grid's member is as deep as DAP2 goes),
//! brackets per name and digits per number are capped before anything is resolved.

use super::model::{DapError, Model};

/// Longest constraint expression (bytes, after URL decoding).
pub const MAX_CE: usize = 8192;
/// Most projections in one expression.
pub const MAX_PROJECTIONS: usize = 256;
/// Most names in one projection (`grid.member`).
pub const MAX_DEPTH: usize = 2;
/// Most hyperslab brackets after one name.
pub const MAX_BRACKETS: usize = 64;
/// Largest index written in an expression (2^53: any real dimension is smaller).
pub const MAX_INDEX: u64 = 1 << 53;

/// A hyperslab along one dimension: `count` indices from `start`, `stride` apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slab {
    pub start: u64,
    pub stride: u64,
    pub count: u64,
}

impl Slab {
    /// The whole dimension.
    pub fn all(len: u64) -> Slab {
        Slab {
            start: 0,
            stride: 1,
            count: len,
        }
    }

    /// The index of the `i`-th selected element.
    pub fn at(&self, i: u64) -> u64 {
        self.start + i * self.stride
    }
}

/// What one variable of the answer carries. A plain variable (or a Grid named whole)
/// has `array`; a Grid's members named one by one fill `array` and `maps` as named.
#[derive(Clone, Debug, PartialEq)]
pub struct Pick {
    pub var: usize,
    /// The variable's (a Grid's array's) hyperslab, if it is sent.
    pub array: Option<Vec<Slab>>,
    /// For a Grid: each map's hyperslab, if it is sent.
    pub maps: Vec<Option<Slab>>,
    /// Named as a whole Grid (`tas[…]`), or a plain variable.
    pub whole: bool,
}

impl Pick {
    /// Whether the answer shows it as a Grid (array and every map sent) rather than a
    /// Structure of the members named.
    pub fn is_grid(&self, model: &Model) -> bool {
        model.vars[self.var].maps.is_some()
            && self.array.is_some()
            && self.maps.iter().all(Option::is_some)
    }
}

/// One parsed name with its brackets.
#[derive(Debug, PartialEq)]
struct Comp {
    name: String,
    slabs: Vec<(u64, u64, u64)>,
}

fn bad(msg: impl Into<String>) -> DapError {
    DapError::Constraint(msg.into())
}

/// Undoes DAP's `%XX` escapes in a name.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let h = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(x) = h {
                out.push(x);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn number(&mut self) -> Result<u64, DapError> {
        let from = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
            if self.i - from > 16 {
                return Err(bad("an index has more than 16 digits"));
            }
        }
        if self.i == from {
            return Err(bad(format!(
                "expected a number at byte {} of the constraint",
                self.i
            )));
        }
        let n: u64 = std::str::from_utf8(&self.s[from..self.i])
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| bad("bad number"))?;
        if n > MAX_INDEX {
            return Err(bad(format!("index {n} is larger than {MAX_INDEX}")));
        }
        Ok(n)
    }

    fn bracket(&mut self) -> Result<(u64, u64, u64), DapError> {
        // at '['
        self.i += 1;
        let a = self.number()?;
        let r = match self.peek() {
            Some(b']') => (a, 1, a),
            Some(b':') => {
                self.i += 1;
                let b = self.number()?;
                match self.peek() {
                    Some(b']') => (a, 1, b),
                    Some(b':') => {
                        self.i += 1;
                        let c = self.number()?;
                        (a, b, c)
                    }
                    _ => {
                        return Err(bad(
                            "a hyperslab is [i], [start:stop] or [start:stride:stop]",
                        ))
                    }
                }
            }
            _ => {
                return Err(bad(
                    "a hyperslab is [i], [start:stop] or [start:stride:stop]",
                ))
            }
        };
        if self.peek() != Some(b']') {
            return Err(bad(
                "a hyperslab is [i], [start:stop] or [start:stride:stop]",
            ));
        }
        self.i += 1;
        Ok(r)
    }

    fn comp(&mut self) -> Result<Comp, DapError> {
        let from = self.i;
        while let Some(c) = self.peek() {
            if matches!(c, b',' | b'.' | b'[' | b']' | b'&')
                || c.is_ascii_whitespace()
                || matches!(
                    c,
                    b'(' | b')' | b'"' | b'{' | b'}' | b'=' | b'<' | b'>' | b'!' | b':'
                )
            {
                break;
            }
            self.i += 1;
        }
        if self.i == from {
            return Err(match self.peek() {
                Some(b'(') | Some(b')') => bad("server functions are not supported"),
                Some(c) => bad(format!(
                    "expected a variable name at byte {} of the constraint, found {:?}",
                    self.i, c as char
                )),
                None => bad("the constraint ends where a variable name was expected"),
            });
        }
        let name = unescape(&String::from_utf8_lossy(&self.s[from..self.i]));
        if self.peek() == Some(b'(') {
            return Err(bad("server functions are not supported"));
        }
        let mut slabs = Vec::new();
        while self.peek() == Some(b'[') {
            if slabs.len() == MAX_BRACKETS {
                return Err(bad(format!(
                    "more than {MAX_BRACKETS} hyperslabs on {name}"
                )));
            }
            slabs.push(self.bracket()?);
        }
        Ok(Comp { name, slabs })
    }

    fn projection(&mut self) -> Result<Vec<Comp>, DapError> {
        let mut path = vec![self.comp()?];
        while self.peek() == Some(b'.') {
            self.i += 1;
            if path.len() == MAX_DEPTH {
                return Err(bad(format!(
                    "names nest at most {MAX_DEPTH} deep (grid.member)"
                )));
            }
            path.push(self.comp()?);
        }
        Ok(path)
    }
}

/// Parses the projection part of `ce` (what precedes the first `&`); the selection
/// clauses must be empty.
fn parse(ce: &str) -> Result<Vec<Vec<Comp>>, DapError> {
    if ce.len() > MAX_CE {
        return Err(bad(format!(
            "the constraint is {} bytes, more than {MAX_CE}",
            ce.len()
        )));
    }
    let mut parts = ce.split('&');
    let proj = parts.next().unwrap_or("").trim();
    if parts.any(|s| !s.trim().is_empty()) {
        return Err(bad(
            "selections (&…) are not supported: these are arrays; use hyperslabs",
        ));
    }
    let mut out = Vec::new();
    if proj.is_empty() {
        return Ok(out);
    }
    let mut p = Parser {
        s: proj.as_bytes(),
        i: 0,
    };
    loop {
        if out.len() == MAX_PROJECTIONS {
            return Err(bad(format!("more than {MAX_PROJECTIONS} projections")));
        }
        out.push(p.projection()?);
        match p.peek() {
            None => break,
            Some(b',') => p.i += 1,
            Some(c) => {
                return Err(bad(format!(
                    "unexpected {:?} at byte {} of the constraint",
                    c as char, p.i
                )))
            }
        }
    }
    Ok(out)
}

fn slab(name: &str, dim: &str, len: u64, (a, s, b): (u64, u64, u64)) -> Result<Slab, DapError> {
    if s == 0 {
        return Err(bad(format!("{name}: a stride of 0 along {dim}")));
    }
    if b < a {
        return Err(bad(format!(
            "{name}: hyperslab [{a}:{s}:{b}] along {dim} ends before it starts"
        )));
    }
    if b >= len {
        return Err(bad(format!(
            "{name}: index {b} along {dim} is out of range (its length is {len})"
        )));
    }
    Ok(Slab {
        start: a,
        stride: s,
        count: (b - a) / s + 1,
    })
}

fn slabs(model: &Model, var: usize, given: &[(u64, u64, u64)]) -> Result<Vec<Slab>, DapError> {
    let v = &model.vars[var];
    if given.is_empty() {
        return Ok(v.dims.iter().map(|(_, n)| Slab::all(*n)).collect());
    }
    if given.len() != v.dims.len() {
        return Err(bad(format!(
            "{} has {} dimension(s); {} hyperslab(s) given",
            v.name,
            v.dims.len(),
            given.len()
        )));
    }
    v.dims
        .iter()
        .zip(given)
        .map(|((d, n), g)| slab(&v.name, d, *n, *g))
        .collect()
}

fn lookup(model: &Model, name: &str) -> Result<usize, DapError> {
    if let Some(i) = model.var(name) {
        return Ok(i);
    }
    if let Some((_, why)) = model.omitted.iter().find(|(n, _)| n == name) {
        return Err(bad(format!(
            "{name} is {why}: read it whole from /data or through virtual Zarr"
        )));
    }
    Err(DapError::NoVariable(format!(
        "no variable {name:?} in this file"
    )))
}

/// The picks of `ce`, in the file's variable order (an empty expression: everything).
pub fn resolve(model: &Model, ce: &str) -> Result<Vec<Pick>, DapError> {
    let parsed = parse(ce)?;
    let whole = |var: usize, array: Vec<Slab>| -> Pick {
        let maps = match &model.vars[var].maps {
            Some(m) => array.iter().take(m.len()).map(|s| Some(*s)).collect(),
            None => Vec::new(),
        };
        Pick {
            var,
            array: Some(array),
            maps,
            whole: true,
        }
    };
    if parsed.is_empty() {
        return Ok((0..model.vars.len())
            .map(|i| whole(i, slabs(model, i, &[]).unwrap_or_default()))
            .collect());
    }
    let mut picks: Vec<Pick> = Vec::new();
    for path in parsed {
        let var = lookup(model, &path[0].name)?;
        let v = &model.vars[var];
        let existing = picks.iter().position(|p| p.var == var);
        if path.len() == 1 {
            if existing.is_some() {
                return Err(bad(format!("{} is named twice", v.name)));
            }
            let s = slabs(model, var, &path[0].slabs)?;
            picks.push(whole(var, s));
            continue;
        }
        let Some(maps) = &v.maps else {
            return Err(bad(format!(
                "{} is not a Grid: it has no member {:?}",
                v.name, path[1].name
            )));
        };
        if !path[0].slabs.is_empty() {
            return Err(bad(format!(
                "put the hyperslab on the member, not on the Grid {}",
                v.name
            )));
        }
        let i = match existing {
            Some(i) if picks[i].whole => return Err(bad(format!("{} is named twice", v.name))),
            Some(i) => i,
            None => {
                picks.push(Pick {
                    var,
                    array: None,
                    maps: vec![None; maps.len()],
                    whole: false,
                });
                picks.len() - 1
            }
        };
        let member = &path[1];
        if member.name == v.name {
            if picks[i].array.is_some() {
                return Err(bad(format!("{}.{} is named twice", v.name, v.name)));
            }
            picks[i].array = Some(slabs(model, var, &member.slabs)?);
            continue;
        }
        let Some(k) = v.dims.iter().position(|(d, _)| *d == member.name) else {
            return Err(DapError::NoVariable(format!(
                "the Grid {} has no member {:?}",
                v.name, member.name
            )));
        };
        if picks[i].maps[k].is_some() {
            return Err(bad(format!("{}.{} is named twice", v.name, member.name)));
        }
        let m = &model.vars[maps[k]];
        picks[i].maps[k] = Some(match member.slabs.as_slice() {
            [] => Slab::all(m.dims.first().map_or(0, |d| d.1)),
            [one] => slab(
                &member.name,
                &member.name,
                m.dims.first().map_or(0, |d| d.1),
                *one,
            )?,
            _ => {
                return Err(bad(format!(
                    "{}.{} has 1 dimension; {} hyperslabs given",
                    v.name,
                    member.name,
                    member.slabs.len()
                )))
            }
        });
    }
    picks.sort_by_key(|p| p.var);
    Ok(picks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dap::model::{DapVar, Stored};

    fn var(name: &str, dims: &[(&str, u64)]) -> DapVar {
        DapVar {
            name: name.into(),
            stored: Stored::F32,
            dims: dims.iter().map(|(d, n)| (d.to_string(), *n)).collect(),
            nc_shape: dims.iter().map(|d| d.1).collect(),
            attrs: Vec::new(),
            maps: None,
        }
    }

    fn model() -> Model {
        let mut tas = var("tas", &[("time", 12), ("lat", 4), ("lon", 8)]);
        tas.maps = Some(vec![0, 1, 2]);
        Model {
            name: "f.nc".into(),
            vars: vec![
                var("time", &[("time", 12)]),
                var("lat", &[("lat", 4)]),
                var("lon", &[("lon", 8)]),
                tas,
                var("bnds", &[("time", 12), ("nb", 2)]),
                var("scalar", &[]),
            ],
            global: Vec::new(),
            unlimited: None,
            extra_dims: Vec::new(),
            omitted: vec![("big".into(), "int64, which DAP2 has no type for".into())],
        }
    }

    #[test]
    fn projections_and_hyperslabs() {
        let m = model();
        let all = resolve(&m, "").unwrap();
        assert_eq!(all.len(), 6);
        assert!(all[3].is_grid(&m));
        let p = resolve(&m, "tas[0:2:11][1][0:7],lat").unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].var, 1);
        let t = &p[1];
        assert!(t.is_grid(&m));
        assert_eq!(
            t.array.as_ref().unwrap()[0],
            Slab {
                start: 0,
                stride: 2,
                count: 6
            }
        );
        assert_eq!(
            t.maps[1],
            Some(Slab {
                start: 1,
                stride: 1,
                count: 1
            })
        );
        let p = resolve(&m, "tas.tas[0][0:3][0:7],tas.lon&").unwrap();
        assert!(!p[0].is_grid(&m));
        assert!(p[0].array.is_some());
        assert_eq!(p[0].maps, vec![None, None, Some(Slab::all(8))]);
        let p = resolve(&m, "tas.tas,tas.time,tas.lat,tas.lon").unwrap();
        assert!(p[0].is_grid(&m));
        assert_eq!(resolve(&m, "scalar").unwrap()[0].array, Some(vec![]));
        assert_eq!(resolve(&m, "t%61s").unwrap()[0].var, 3);
    }

    #[test]
    fn hostile_expressions_are_errors() {
        let m = model();
        let cases = [
            "tas[0:0:3][0][0]",
            "tas[12][0][0]",
            "tas[3:1][0][0]",
            "tas[0][0]",
            "tas[99999999999999999999][0][0]",
            "tas[0:18446744073709551615:3][0][0]",
            "tas[-1][0][0]",
            "tas[0][0][0",
            "tas.tas.tas",
            "a.b.c.d.e",
            "lat.lat",
            "tas[0][0][0].tas",
            "tas,tas",
            "tas,tas.tas",
            "tas&time>3",
            "mean(tas)",
            "tas.nope",
            "nope",
            "big",
            ",",
            "tas,",
            "\"tas\"",
            "scalar[0]",
        ];
        for c in cases {
            assert!(resolve(&m, c).is_err(), "{c} should be refused");
        }
        assert!(matches!(resolve(&m, "nope"), Err(DapError::NoVariable(_))));
        let long = "lat,".repeat(MAX_CE / 4 + 1);
        assert!(resolve(&m, &long).is_err());
        let many = vec!["lat"; MAX_PROJECTIONS + 1].join(",");
        assert!(resolve(&m, &many).is_err());
        let deep = "tas".to_string() + &"[0]".repeat(MAX_BRACKETS + 5);
        assert!(resolve(&m, &deep).is_err());
        let nested = "a.".repeat(2000) + "a";
        assert!(resolve(&m, &nested).is_err());
        // A huge stride inside the range is fine: one element.
        let p = resolve(&m, "tas[0:9000000000000:11][0][0]").unwrap();
        assert_eq!(p[0].array.as_ref().unwrap()[0].count, 1);
    }
}
