//! OPeNDAP DAP2 over a netCDF file: the DDS, DAS, `.dods` (DDS + XDR values),
//! ASCII and HTML responses, with constraint expressions (projections and
//! `[start:stride:stop]` hyperslabs). No HTTP here: the gateway maps URLs to these.
//!
//! What maps how (THREDDS's choices, docs/decisions/0106): byte and ubyte are
//! `Byte` with an `_Unsigned` attribute ("false"/"true"); short/ushort `Int16`/
//! `UInt16`; int/uint `Int32`/`UInt32`; float/double `Float32`/`Float64`; char
//! arrays `String` (the last dimension the string length, kept in the DAS's `DODS`
//! table); netCDF-4 strings `String`. int64, uint64 and user-defined types have no
//! DAP2 type: such variables are left out (named in a request: an error saying so).
//! A variable of rank > 1 whose every dimension has a coordinate variable is a
//! Grid. Attributes go through as they are (`scale_factor`, `add_offset`,
//! `_FillValue`: nothing is unpacked or masked).
//!
//! Every read goes through the netCDF guards ([`crate::netcdf::ReadAt`] behind a
//! byte budget and a deadline, a worker thread under `catch_unwind`), the header
//! and the hyperslabs read in one pass; a request is bounded before any value is
//! read: [`MAX_VALUES`] values and [`MAX_BYTES`] bytes per answer.

mod ce;
mod model;
mod read;
mod text;

use std::sync::Arc;

use crate::netcdf::{Limits, NcError, ReadAt};

pub use ce::{resolve, Pick, Slab, MAX_BRACKETS, MAX_CE, MAX_DEPTH, MAX_PROJECTIONS};
pub use model::{Attr, DapError, DapType, DapVar, Model, Stored};
pub use read::Column;

/// Most values one answer carries (a string counts one).
pub const MAX_VALUES: u64 = 32 << 20;
/// Largest answer body (bytes of XDR).
pub const MAX_BYTES: u64 = 128 << 20;

fn nc(e: NcError) -> DapError {
    match e {
        NcError::Timeout(t) => DapError::Temporary(format!(
            "reading the file took longer than {t:?}: ask for less, or try again"
        )),
        NcError::Limit(m) if m.contains("reader thread") => DapError::Temporary(m),
        NcError::Limit(m) => DapError::TooLarge(m),
        other => DapError::Unreadable(other.to_string()),
    }
}

/// Opens `source` behind the guards and runs `f` on its model and file.
fn with_model<T: Send + 'static>(
    source: Arc<dyn ReadAt>,
    name: &str,
    limits: &Limits,
    f: impl FnOnce(&netcdf_reader::NcFile, Model) -> Result<T, DapError> + Send + 'static,
) -> Result<T, DapError> {
    let name = name.to_string();
    crate::netcdf::run_with_file(source, limits, MAX_BYTES, move |file, _, _| {
        Ok(model::build(file, &name).and_then(|m| f(file, m)))
    })
    .map_err(nc)?
}

/// The file's DAP model (its header only is read).
pub fn model_of(source: Arc<dyn ReadAt>, name: &str, limits: &Limits) -> Result<Model, DapError> {
    with_model(source, name, limits, |_, m| Ok(m))
}

/// The DDS of `ce` (an empty expression: the whole file).
pub fn dds(model: &Model, ce: &str) -> Result<String, DapError> {
    let picks = ce::resolve(model, ce)?;
    Ok(text::dds(model, &picks))
}

/// The DAS.
pub fn das(model: &Model) -> String {
    text::das(model)
}

/// The HTML page of the dataset at `url`.
pub fn html(model: &Model, url: &str) -> String {
    text::html(model, url)
}

/// The DAP2 `Error { code; message; }` body of `e`.
pub fn error_body(e: &DapError) -> String {
    text::error(e)
}

/// A DAP2 `Error` body with another code (a status the gateway answers for its own
/// reasons, e.g. 502 when a fetch over NDN fails).
pub fn error_body_with(code: u16, message: &str) -> String {
    text::error_with(code, message)
}

/// One member to send: the variable and its hyperslab.
struct Member {
    var: usize,
    slabs: Vec<Slab>,
    path: String,
}

/// The members the picks send, in order, after checking the answer's size.
fn plan(model: &Model, picks: &[Pick]) -> Result<Vec<Member>, DapError> {
    let mut out = Vec::new();
    let (mut values, mut bytes) = (0u64, 0u64);
    for p in picks {
        let v = &model.vars[p.var];
        let nested = v.maps.is_some();
        let mut add = |var: usize, slabs: Vec<Slab>| -> Result<(), DapError> {
            let m = &model.vars[var];
            let n = slabs
                .iter()
                .try_fold(1u64, |a, s| a.checked_mul(s.count))
                .unwrap_or(u64::MAX);
            let per = match m.stored {
                Stored::Char => {
                    let strlen = if m.dims.len() < m.nc_shape.len() {
                        m.nc_shape.last().copied().unwrap_or(0)
                    } else {
                        m.nc_shape.iter().product()
                    };
                    // The whole variable is read to pick strings from.
                    let whole: u64 = m
                        .nc_shape
                        .iter()
                        .try_fold(1u64, |a, &x| a.checked_mul(x))
                        .unwrap_or(u64::MAX);
                    if whole > MAX_BYTES {
                        return Err(DapError::TooLarge(format!(
                            "{} holds {whole} characters, more than the {MAX_BYTES} a request may read",
                            m.name
                        )));
                    }
                    strlen.saturating_add(7)
                }
                Stored::Str => {
                    if m.count() > MAX_VALUES {
                        return Err(DapError::TooLarge(format!(
                            "{} holds {} strings, more than the {MAX_VALUES} a request may read",
                            m.name,
                            m.count()
                        )));
                    }
                    8
                }
                _ => m.dtype().xdr_size(),
            };
            values = values.saturating_add(n);
            bytes = bytes
                .saturating_add(n.saturating_mul(per))
                .saturating_add(8);
            if values > MAX_VALUES || bytes > MAX_BYTES {
                return Err(DapError::TooLarge(format!(
                    "the request asks for {values} values ({bytes} bytes) so far; one request may carry at most {MAX_VALUES} values and {MAX_BYTES} bytes: ask for a hyperslab (e.g. fewer time steps)"
                )));
            }
            let path = if nested {
                format!("{}.{}", v.name, m.name)
            } else {
                m.name.clone()
            };
            out.push(Member { var, slabs, path });
            Ok(())
        };
        if let Some(s) = &p.array {
            add(p.var, s.clone())?;
        }
        if let Some(maps) = &v.maps {
            for (k, s) in p.maps.iter().enumerate() {
                if let (Some(s), Some(&m)) = (s, maps.get(k)) {
                    add(m, vec![*s])?;
                }
            }
        }
    }
    Ok(out)
}

/// The `.dods` answer of `ce`: the constrained DDS, `Data:`, then the values in XDR.
pub fn dods(
    source: Arc<dyn ReadAt>,
    name: &str,
    ce: &str,
    limits: &Limits,
) -> Result<Vec<u8>, DapError> {
    let ce = ce.to_string();
    with_model(source, name, limits, move |file, model| {
        let picks = ce::resolve(&model, &ce)?;
        let members = plan(&model, &picks)?;
        let mut out = text::dds(&model, &picks).into_bytes();
        // The values start on a multiple of four bytes: libnetcdf's DAP2 client
        // misreads a Byte array followed by another member otherwise. Spaces
        // after the DDS are whitespace to every DDS parser.
        while (out.len() + 7) % 4 != 0 {
            out.push(b' ');
        }
        out.extend_from_slice(b"\nData:\n");
        for m in members {
            let v = &model.vars[m.var];
            let c = read::column(file, v, &m.slabs)?;
            read::encode(&c, v.dims.is_empty(), &mut out);
            if out.len() as u64 > MAX_BYTES.saturating_add(1 << 20) {
                return Err(DapError::TooLarge(format!(
                    "the answer passed {MAX_BYTES} bytes: ask for a hyperslab"
                )));
            }
        }
        Ok(out)
    })
}

/// The `.ascii` answer of `ce`: the constrained DDS, a rule, then each member's
/// values as text.
pub fn ascii(
    source: Arc<dyn ReadAt>,
    name: &str,
    ce: &str,
    limits: &Limits,
) -> Result<String, DapError> {
    let ce = ce.to_string();
    with_model(source, name, limits, move |file, model| {
        let picks = ce::resolve(&model, &ce)?;
        let members = plan(&model, &picks)?;
        let mut out = text::dds(&model, &picks);
        out.push_str("---------------------------------------------\n");
        for m in members {
            let v = &model.vars[m.var];
            let c = read::column(file, v, &m.slabs)?;
            text::ascii_member(&mut out, &m.path, &text::counts(&m.slabs), &c);
            if out.len() as u64 > MAX_BYTES {
                return Err(DapError::TooLarge(format!(
                    "the answer passed {MAX_BYTES} bytes: ask for a hyperslab"
                )));
            }
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> Model {
        let f32v = |name: &str, dims: &[(&str, u64)]| DapVar {
            name: name.into(),
            stored: Stored::F32,
            dims: dims.iter().map(|(d, n)| (d.to_string(), *n)).collect(),
            nc_shape: dims.iter().map(|d| d.1).collect(),
            attrs: vec![(
                "units".into(),
                Attr::Values(DapType::String, vec![model::quote("K \"x\"")]),
            )],
            maps: None,
        };
        let mut tas = f32v("tas", &[("time", 2), ("lat", 3)]);
        tas.maps = Some(vec![0, 1]);
        Model {
            name: "t a.nc".into(),
            vars: vec![
                f32v("time", &[("time", 2)]),
                f32v("lat", &[("lat", 3)]),
                tas,
            ],
            global: vec![(
                "title".into(),
                Attr::Values(DapType::String, vec![model::quote("t")]),
            )],
            unlimited: Some("time".into()),
            extra_dims: vec![("bnds".into(), 2)],
            omitted: Vec::new(),
        }
    }

    #[test]
    fn dds_das_and_errors() {
        let m = model();
        let d = dds(&m, "").unwrap();
        assert!(
            d.starts_with("Dataset {\n    Float32 time[time = 2];\n"),
            "{d}"
        );
        assert!(d.contains("    Grid {\n      ARRAY:\n        Float32 tas[time = 2][lat = 3];\n      MAPS:\n        Float32 time[time = 2];\n        Float32 lat[lat = 3];\n    } tas;\n"), "{d}");
        assert!(d.ends_with("} t%20a.nc;\n"));
        let d = dds(&m, "tas.tas[1][0:2:2]").unwrap();
        assert!(
            d.contains("    Structure {\n        Float32 tas[time = 1][lat = 2];\n    } tas;\n"),
            "{d}"
        );
        let a = das(&m);
        assert!(
            a.contains("    tas {\n        String units \"K \\\"x\\\"\";\n    }\n"),
            "{a}"
        );
        assert!(
            a.contains("    DODS_EXTRA {\n        String Unlimited_Dimension \"time\";\n    }\n")
        );
        assert!(a.contains("    EXTRA_DIMENSION {\n        Int32 bnds 2;\n    }\n"));
        let e = error_body(&DapError::Constraint("bad \"x\"".into()));
        assert_eq!(
            e,
            "Error {\n    code = 400;\n    message = \"bad \\\"x\\\"\";\n};\n"
        );
    }

    #[test]
    fn answers_are_bounded_before_reading() {
        let mut m = model();
        m.vars[2].dims = vec![("time".into(), 1 << 20), ("lat".into(), 1 << 20)];
        m.vars[0].dims = vec![("time".into(), 1 << 20)];
        m.vars[1].dims = vec![("lat".into(), 1 << 20)];
        let picks = resolve(&m, "tas").unwrap();
        assert!(matches!(plan(&m, &picks), Err(DapError::TooLarge(_))));
        let picks = resolve(&m, "tas.tas[0][0:1023]").unwrap();
        assert_eq!(plan(&m, &picks).unwrap().len(), 1);
    }
}
