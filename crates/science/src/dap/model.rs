//! A netCDF file as DAP2 sees it: every root-group variable DAP2 can carry, with its
//! DAP type and dimensions, Grids (a variable of rank > 1 whose every dimension has a
//! coordinate variable, none repeated, as THREDDS builds them), and the attributes
//! with their DAP types. Built from the parser's model, no data read. A leaf: the
//! constraint parser, the text responses and the value encoder use it.

use netcdf_reader::{NcAttrValue, NcAttribute, NcFile, NcType, NcVariable};

/// Why a DAP request cannot be answered; each maps to a DAP `Error` and a status.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DapError {
    /// A malformed or unsatisfiable constraint expression (400).
    #[error("{0}")]
    Constraint(String),
    /// No such variable in this file (404 as THREDDS answers, code 404).
    #[error("{0}")]
    NoVariable(String),
    /// More values than one request may carry (413).
    #[error("{0}")]
    TooLarge(String),
    /// The file cannot be read as netCDF, or a read failed for good (422).
    #[error("{0}")]
    Unreadable(String),
    /// A passing condition: a source read that timed out or failed (503).
    #[error("{0}")]
    Temporary(String),
}

impl DapError {
    /// The HTTP status (and the DAP `code`) of the error.
    pub fn status(&self) -> u16 {
        match self {
            DapError::Constraint(_) => 400,
            DapError::NoVariable(_) => 404,
            DapError::TooLarge(_) => 413,
            DapError::Unreadable(_) => 422,
            DapError::Temporary(_) => 503,
        }
    }
}

/// Largest number of variables, dimensions, or attributes per owner taken from a file.
pub const MAX_ITEMS: usize = 16384;

/// The DAP2 base types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DapType {
    Byte,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Float32,
    Float64,
    String,
}

impl DapType {
    /// The type's name in a DDS or DAS.
    pub fn name(self) -> &'static str {
        match self {
            DapType::Byte => "Byte",
            DapType::Int16 => "Int16",
            DapType::UInt16 => "UInt16",
            DapType::Int32 => "Int32",
            DapType::UInt32 => "UInt32",
            DapType::Float32 => "Float32",
            DapType::Float64 => "Float64",
            DapType::String => "String",
        }
    }

    /// Bytes one value takes in a `.dods` array (strings: their length word only).
    pub fn xdr_size(self) -> u64 {
        match self {
            DapType::Byte => 1,
            DapType::Float64 => 8,
            _ => 4,
        }
    }
}

/// How a variable is stored in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    F32,
    F64,
    /// `char`: the last dimension is the string length (rank ≥ 1).
    Char,
    /// netCDF-4 `string`.
    Str,
}

impl Stored {
    /// The DAP type a stored type is sent as (THREDDS's mapping: both byte types
    /// are `Byte`, told apart by the `_Unsigned` attribute).
    pub fn dap(self) -> DapType {
        match self {
            Stored::I8 | Stored::U8 => DapType::Byte,
            Stored::I16 => DapType::Int16,
            Stored::U16 => DapType::UInt16,
            Stored::I32 => DapType::Int32,
            Stored::U32 => DapType::UInt32,
            Stored::F32 => DapType::Float32,
            Stored::F64 => DapType::Float64,
            Stored::Char | Stored::Str => DapType::String,
        }
    }
}

/// An attribute value in DAS form.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    /// Type and values, each already written as the DAS writes it (strings quoted).
    Values(DapType, Vec<String>),
    /// A nested table (`DODS { Int32 strlen 8; }` of a char array).
    Table(Vec<(String, Attr)>),
}

/// A variable DAP2 can carry.
#[derive(Clone, Debug, PartialEq)]
pub struct DapVar {
    pub name: String,
    pub stored: Stored,
    /// Its DAP dimensions: a char array's last (string length) dimension is not one.
    pub dims: Vec<(String, u64)>,
    /// The file's shape (with a char array's string length).
    pub nc_shape: Vec<u64>,
    pub attrs: Vec<(String, Attr)>,
    /// For a Grid, the variable index of each dimension's map.
    pub maps: Option<Vec<usize>>,
}

impl DapVar {
    pub fn dtype(&self) -> DapType {
        self.stored.dap()
    }

    /// Values in the whole variable (a string counts one).
    pub fn count(&self) -> u64 {
        self.dims
            .iter()
            .try_fold(1u64, |a, (_, n)| a.checked_mul(*n))
            .unwrap_or(u64::MAX)
    }
}

/// The file as DAP2 sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// The dataset's name (the file name) after the DDS's closing brace.
    pub name: String,
    pub vars: Vec<DapVar>,
    pub global: Vec<(String, Attr)>,
    pub unlimited: Option<String>,
    /// Dimensions no variable uses (`EXTRA_DIMENSION`).
    pub extra_dims: Vec<(String, u64)>,
    /// Variables left out, and why (int64, user-defined types).
    pub omitted: Vec<(String, String)>,
}

impl Model {
    pub fn var(&self, name: &str) -> Option<usize> {
        self.vars.iter().position(|v| v.name == name)
    }
}

fn stored(t: &NcType) -> Result<Stored, String> {
    Ok(match t {
        NcType::Byte => Stored::I8,
        NcType::UByte => Stored::U8,
        NcType::Short => Stored::I16,
        NcType::UShort => Stored::U16,
        NcType::Int => Stored::I32,
        NcType::UInt => Stored::U32,
        NcType::Float => Stored::F32,
        NcType::Double => Stored::F64,
        NcType::Char => Stored::Char,
        NcType::String => Stored::Str,
        NcType::Int64 => return Err("int64, which DAP2 has no type for".into()),
        NcType::UInt64 => return Err("uint64, which DAP2 has no type for".into()),
        other => return Err(format!("a user-defined type ({other:?}) DAP2 cannot carry")),
    })
}

/// A DAS string: quoted, `"` and `\` escaped.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// A float as the DAS writes it: the shortest text that reads back to the same value.
pub fn float_text<T: std::fmt::Debug + Into<f64> + Copy>(x: T) -> String {
    let v: f64 = x.into();
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        format!("{x:?}")
    }
}

fn nums<T: ToString>(v: &[T]) -> Vec<String> {
    v.iter().map(T::to_string).collect()
}

/// An attribute's DAS type and values (THREDDS's mapping: signed bytes with a
/// negative value are widened to Int16; 64-bit integers go as Int32 when every value
/// fits, else Float64).
fn attr_value(v: &NcAttrValue) -> Option<Attr> {
    Some(match v {
        NcAttrValue::Chars(s) => Attr::Values(DapType::String, vec![quote(s)]),
        NcAttrValue::Strings(v) => {
            Attr::Values(DapType::String, v.iter().map(|s| quote(s)).collect())
        }
        NcAttrValue::Bytes(v) if v.iter().any(|&x| x < 0) => Attr::Values(DapType::Int16, nums(v)),
        NcAttrValue::Bytes(v) => Attr::Values(DapType::Byte, nums(v)),
        NcAttrValue::UBytes(v) => Attr::Values(DapType::Byte, nums(v)),
        NcAttrValue::Shorts(v) => Attr::Values(DapType::Int16, nums(v)),
        NcAttrValue::UShorts(v) => Attr::Values(DapType::UInt16, nums(v)),
        NcAttrValue::Ints(v) => Attr::Values(DapType::Int32, nums(v)),
        NcAttrValue::UInts(v) => Attr::Values(DapType::UInt32, nums(v)),
        // A Float32 is written as its exact value (`0.009999999776482582` for
        // 0.01f): clients that parse attributes as doubles (pydap) then hold the
        // very value the variable's data is compared with (a `_FillValue` masks).
        NcAttrValue::Floats(v) => Attr::Values(
            DapType::Float32,
            v.iter().map(|&x| float_text(f64::from(x))).collect(),
        ),
        NcAttrValue::Doubles(v) => {
            Attr::Values(DapType::Float64, v.iter().map(|&x| float_text(x)).collect())
        }
        NcAttrValue::Int64s(v) => {
            if v.iter().all(|&x| i32::try_from(x).is_ok()) {
                Attr::Values(DapType::Int32, nums(v))
            } else {
                Attr::Values(
                    DapType::Float64,
                    v.iter().map(|&x| float_text(x as f64)).collect(),
                )
            }
        }
        NcAttrValue::UInt64s(v) => {
            if v.iter().all(|&x| i32::try_from(x).is_ok()) {
                Attr::Values(DapType::Int32, nums(v))
            } else {
                Attr::Values(
                    DapType::Float64,
                    v.iter().map(|&x| float_text(x as f64)).collect(),
                )
            }
        }
        NcAttrValue::UserDefined { .. } => return None,
    })
}

fn attrs(owner: &str, list: &[NcAttribute]) -> Result<Vec<(String, Attr)>, DapError> {
    if list.len() > MAX_ITEMS {
        return Err(DapError::Unreadable(format!(
            "{owner}: {} attributes (limit {MAX_ITEMS})",
            list.len()
        )));
    }
    Ok(list
        .iter()
        .filter_map(|a| attr_value(&a.value).map(|v| (a.name.clone(), v)))
        .collect())
}

/// A 1-D variable named as its dimension, of a type a map can have.
fn is_coord(v: &NcVariable) -> bool {
    v.is_coordinate_variable() && stored(&v.dtype).is_ok_and(|s| !matches!(s, Stored::Char))
}

/// The model of an opened file: the root group's variables (sub-groups are not
/// served), attributes, the unlimited dimension.
pub fn build(file: &NcFile, name: &str) -> Result<Model, DapError> {
    let bad = |e: netcdf_reader::Error| DapError::Unreadable(e.to_string());
    let dims = file.dimensions().map_err(bad)?;
    let vars = file.variables().map_err(bad)?;
    let global = file.global_attributes().map_err(bad)?;
    if dims.len() > MAX_ITEMS || vars.len() > MAX_ITEMS {
        return Err(DapError::Unreadable(format!(
            "{} dimensions and {} variables (limit {MAX_ITEMS} each)",
            dims.len(),
            vars.len()
        )));
    }
    let mut out = Model {
        name: name.to_string(),
        vars: Vec::new(),
        global: attrs("global", global)?,
        unlimited: dims.iter().find(|d| d.is_unlimited).map(|d| d.name.clone()),
        extra_dims: Vec::new(),
        omitted: Vec::new(),
    };
    for v in vars {
        let s = match stored(&v.dtype) {
            Ok(s) => s,
            Err(why) => {
                out.omitted.push((v.name.clone(), why));
                continue;
            }
        };
        let shape = v.shape();
        let mut dims: Vec<(String, u64)> = v
            .dimensions
            .iter()
            .map(|d| d.name.clone())
            .zip(shape.iter().copied())
            .collect();
        let mut list = Vec::new();
        // Bytes say whether they are signed (THREDDS's `_Unsigned`); so do the
        // unsigned 16- and 32-bit integers, which libnetcdf's DAP2 client (the
        // classic model) otherwise reads as signed.
        let unsigned = match s {
            Stored::I8 => Some("false"),
            Stored::U8 | Stored::U16 | Stored::U32 => Some("true"),
            _ => None,
        };
        if let Some(u) = unsigned {
            list.push((
                "_Unsigned".into(),
                Attr::Values(DapType::String, vec![quote(u)]),
            ));
        }
        let own = attrs(&v.name, &v.attributes)?;
        list.extend(
            own.into_iter()
                .filter(|(k, _)| !(unsigned.is_some() && k.eq_ignore_ascii_case("_Unsigned"))),
        );
        if s == Stored::Char {
            let (strlen, dim) = match dims.pop() {
                Some((d, n)) => (n, Some(d)),
                None => (0, None),
            };
            let mut t = vec![(
                "strlen".to_string(),
                Attr::Values(DapType::Int32, vec![strlen.to_string()]),
            )];
            if let Some(d) = dim {
                t.push((
                    "dimName".into(),
                    Attr::Values(DapType::String, vec![quote(&d)]),
                ));
            }
            // A 1-D char array is one string (a scalar), as THREDDS sends it.
            list.push(("DODS".into(), Attr::Table(t)));
        }
        out.vars.push(DapVar {
            name: v.name.clone(),
            stored: s,
            dims,
            nc_shape: shape,
            attrs: list,
            maps: None,
        });
    }
    // Grids: rank > 1, numeric, every dimension with a coordinate variable, none twice.
    let coords: Vec<(String, usize)> = vars
        .iter()
        .filter(|v| is_coord(v))
        .filter_map(|v| out.var(&v.name).map(|i| (v.name.clone(), i)))
        .collect();
    for i in 0..out.vars.len() {
        let v = &out.vars[i];
        if v.dims.len() < 2 || matches!(v.stored, Stored::Char | Stored::Str) {
            continue;
        }
        let mut maps = Vec::new();
        for (k, (d, _)) in v.dims.iter().enumerate() {
            if v.dims[..k].iter().any(|(e, _)| e == d) {
                maps.clear();
                break;
            }
            match coords.iter().find(|(c, _)| c == d) {
                Some((_, j)) => maps.push(*j),
                None => {
                    maps.clear();
                    break;
                }
            }
        }
        if maps.len() == v.dims.len() {
            out.vars[i].maps = Some(maps);
        }
    }
    for d in dims {
        let used = vars
            .iter()
            .any(|v| v.dimensions.iter().any(|e| e.name == d.name));
        if !used {
            out.extra_dims.push((d.name.clone(), d.size));
        }
    }
    Ok(out)
}
