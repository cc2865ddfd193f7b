//! The chunk index of a netCDF file: for every variable, the byte range (offset,
//! length) of every stored chunk and what a Zarr v2 array needs to read them in place
//! (`.zarray`: shape, chunks, dtype with byte order, compressor and filters as numcodecs
//! ids, fill value; `.zattrs`: the netCDF attributes and `_ARRAY_DIMENSIONS`).
//!
//! netCDF-4/HDF5: the layout and filter pipeline messages of each dataset's object
//! header and its chunk B-tree are read with the pure-Rust `hdf5-reader` crate, through
//! the same guarded storage as the metadata reader (byte budget, deadline, reads past
//! the end refused), under `catch_unwind`. netCDF-3: every fixed-size variable is one
//! contiguous chunk at its `begin` offset; record variables are "not available" for now.
//!
//! What cannot be described (an unknown filter, an index type not walked, a chunk past
//! the end of the file, a truncated B-tree) is reported per variable as
//! "not available: <reason>", never as a panic.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use hdf5_reader::btree_v1::{collect_btree_v1_leaves_storage, BTreeV1Key};
use hdf5_reader::messages::layout::{ChunkIndexing, DataLayout};
use hdf5_reader::messages::HdfMessage;
use hdf5_reader::object_header::ObjectHeader;
use hdf5_reader::{ByteOrder, Datatype, Storage};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::guard::{guarded_storage, FileSource, ReadAt};
use super::meta::{AttrValue, Format, Limits, NcError, NcMeta};

/// One stored chunk: its key in the Zarr store (`"0.3.1"`) and its bytes in the file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ChunkRef {
    /// Chunk grid index per dimension.
    pub index: Vec<u64>,
    pub offset: u64,
    pub length: u64,
}

/// The Zarr view of one variable, or why there is none.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct VarChunks {
    pub name: String,
    /// The `.zarray` document (absent when not available).
    pub zarray: Option<Value>,
    /// The `.zattrs` document.
    pub zattrs: Value,
    pub chunks: Vec<ChunkRef>,
    /// `Some("not available: …")` when the variable cannot be served as Zarr.
    pub unavailable: Option<String>,
    /// The stored values (as f64), for a small variable along the record (time)
    /// dimension, or a fixed `time` dimension (`time`, `time_bnds`): a dataset's reference set serves these
    /// concatenated inline, one read for the whole axis, whatever the files' chunking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<f64>>,
}

/// At most this many values are kept inline per variable.
const MAX_INLINE_VALUES: u64 = 1 << 16;

/// The chunk index of one file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ChunkIndex {
    /// File size the index was computed for (a reader checks it still matches).
    pub file_len: u64,
    /// Global attributes (the Zarr group's `.zattrs`).
    pub global: Value,
    /// Dimension name → length.
    pub dims: BTreeMap<String, u64>,
    pub variables: Vec<VarChunks>,
}

impl ChunkIndex {
    pub fn variable(&self, name: &str) -> Option<&VarChunks> {
        self.variables.iter().find(|v| v.name == name)
    }
}

/// Computes the chunk index of a local file.
pub fn chunk_index(path: &Path, limits: &Limits) -> Result<ChunkIndex, NcError> {
    let source = FileSource::open(path).map_err(|source| NcError::Open {
        path: path.display().to_string(),
        source,
    })?;
    chunk_index_from(Arc::new(source), limits)
}

/// Computes the chunk index through a range source.
pub fn chunk_index_from(source: Arc<dyn ReadAt>, limits: &Limits) -> Result<ChunkIndex, NcError> {
    let meta = super::read_from(source.clone(), limits)?;
    let file_len = source.len();
    let limits2 = limits.clone();
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        build(source, &meta, file_len, &limits2)
    }));
    match out {
        Ok(r) => r,
        Err(_) => Err(NcError::Panic("chunk index reader".into())),
    }
}

fn attr_json(v: &AttrValue) -> Value {
    fn one_or_many<T: Serialize>(v: &[T]) -> Value {
        if v.len() == 1 {
            json!(v[0])
        } else {
            json!(v)
        }
    }
    match v {
        AttrValue::Text(s) => json!(s),
        AttrValue::Strings(s) => one_or_many(s),
        AttrValue::Int(x) => one_or_many(x),
        AttrValue::UInt(x) => one_or_many(x),
        AttrValue::Float(x) => {
            // JSON has no NaN/Inf: Zarr's convention is the strings.
            let f: Vec<Value> = x.iter().map(|&f| float_json(f)).collect();
            if f.len() == 1 {
                f[0].clone()
            } else {
                Value::Array(f)
            }
        }
        AttrValue::Other(s) => json!(s),
    }
}

fn float_json(f: f64) -> Value {
    if f.is_nan() {
        json!("NaN")
    } else if f == f64::INFINITY {
        json!("Infinity")
    } else if f == f64::NEG_INFINITY {
        json!("-Infinity")
    } else {
        json!(f)
    }
}

/// The numpy type string of a netCDF-3 (big-endian) CDL type.
fn classic_dtype(cdl: &str) -> Option<&'static str> {
    Some(match cdl {
        "byte" => "|i1",
        "char" => "|S1",
        "short" => ">i2",
        "int" => ">i4",
        "float" => ">f4",
        "double" => ">f8",
        "ubyte" => "|u1",
        "ushort" => ">u2",
        "uint" => ">u4",
        "int64" => ">i8",
        "uint64" => ">u8",
        _ => return None,
    })
}

/// The numpy type string of an HDF5 datatype, with its byte order.
fn hdf5_dtype(t: &Datatype) -> Result<String, String> {
    let order = |o: &ByteOrder, size: u8| {
        if size == 1 {
            "|"
        } else if matches!(o, ByteOrder::BigEndian) {
            ">"
        } else {
            "<"
        }
    };
    match t {
        Datatype::FixedPoint {
            size,
            signed,
            byte_order,
        } => Ok(format!(
            "{}{}{}",
            order(byte_order, *size),
            if *signed { "i" } else { "u" },
            size
        )),
        Datatype::FloatingPoint { size, byte_order } => {
            Ok(format!("{}f{}", order(byte_order, *size), size))
        }
        other => Err(format!("datatype {other:?} has no Zarr v2 equivalent here")),
    }
}

fn zattrs(meta: &NcMeta, name: &str) -> Value {
    let mut m = serde_json::Map::new();
    if let Some(v) = meta.variable(name) {
        for (k, a) in &v.attributes {
            // The fill value lives in `.zarray`; netCDF-4 bookkeeping stays out.
            if k == "_FillValue" || k == "_Netcdf4Dimid" || k == "_Netcdf4Coordinates" {
                continue;
            }
            m.insert(k.clone(), attr_json(a));
        }
        m.insert("_ARRAY_DIMENSIONS".into(), json!(v.dims));
    }
    Value::Object(m)
}

fn build(
    source: Arc<dyn ReadAt>,
    meta: &NcMeta,
    file_len: u64,
    limits: &Limits,
) -> Result<ChunkIndex, NcError> {
    let mut global = serde_json::Map::new();
    for (k, a) in &meta.global {
        global.insert(k.clone(), attr_json(a));
    }
    let dims = meta.dims.iter().map(|d| (d.name.clone(), d.len)).collect();
    let mut variables = match meta.format {
        Format::Netcdf4 | Format::Netcdf4Classic => {
            hdf5_vars(source.clone(), meta, file_len, limits)?
        }
        _ => classic_vars(source.clone(), meta, file_len)?,
    };
    inline_values(source, meta, limits, &mut variables);
    Ok(ChunkIndex {
        file_len,
        global: Value::Object(global),
        dims,
        variables,
    })
}

/// Reads the values of the small variables along the unlimited (time) dimension, or
/// along a fixed dimension named `time` when none is unlimited (CMOR writes contiguous
/// files with a fixed `time`): 1-D, or 2-D with at most 4 columns (bounds), numeric,
/// at most [`MAX_INLINE_VALUES`] values. A read that fails, or a non-finite value,
/// leaves the variable without inline values (its chunks are still referenced).
fn inline_values(source: Arc<dyn ReadAt>, meta: &NcMeta, limits: &Limits, vars: &mut [VarChunks]) {
    let Some(record) = meta
        .dims
        .iter()
        .find(|d| d.unlimited)
        .or_else(|| meta.dims.iter().find(|d| d.name == "time"))
        .map(|d| d.name.clone())
    else {
        return;
    };
    let wanted: Vec<String> = meta
        .variables
        .iter()
        .filter(|v| {
            v.dims.first() == Some(&record)
                && (v.dims.len() == 1 || (v.dims.len() == 2 && v.shape[1] <= 4))
                && v.shape.iter().product::<u64>() <= MAX_INLINE_VALUES
                && !matches!(v.dtype.as_str(), "char" | "string")
        })
        .map(|v| v.name.clone())
        .filter(|n| vars.iter().any(|c| &c.name == n && c.unavailable.is_none()))
        .collect();
    if wanted.is_empty() {
        return;
    }
    let names = wanted.clone();
    let read = super::run_with_file(source, limits, MAX_INLINE_VALUES * 8, move |file, _, _| {
        Ok(names
            .iter()
            .map(|n| {
                file.read_variable_as_f64(n)
                    .ok()
                    .map(|a| a.iter().copied().collect::<Vec<f64>>())
                    .filter(|v| v.iter().all(|x| x.is_finite()))
            })
            .collect::<Vec<_>>())
    });
    let Ok(values) = read else { return };
    for (name, v) in wanted.iter().zip(values) {
        if let Some(c) = vars.iter_mut().find(|c| &c.name == name) {
            c.values = v;
        }
    }
}

fn unavailable(meta: &NcMeta, name: &str, why: String) -> VarChunks {
    VarChunks {
        name: name.to_string(),
        zarray: None,
        zattrs: zattrs(meta, name),
        chunks: Vec::new(),
        unavailable: Some(format!("not available: {why}")),
        values: None,
    }
}

fn fill_json(meta: &NcMeta, name: &str) -> Value {
    meta.variable(name)
        .and_then(|v| v.fill_value)
        .map(float_json)
        .unwrap_or(Value::Null)
}

// ---------------------------------------------------------------- netCDF-4 / HDF5

fn hdf5_vars(
    source: Arc<dyn ReadAt>,
    meta: &NcMeta,
    file_len: u64,
    limits: &Limits,
) -> Result<Vec<VarChunks>, NcError> {
    let storage = guarded_storage(source, limits);
    let h5 = hdf5_reader::Hdf5File::from_storage(storage.clone())
        .map_err(|e| NcError::Malformed(e.to_string()))?;
    let sb = h5.superblock();
    let (os, ls) = (sb.offset_size, sb.length_size);
    let mut out = Vec::new();
    for v in &meta.variables {
        let r = h5
            .dataset(&v.name)
            .map_err(|e| e.to_string())
            .and_then(|ds| {
                hdf5_var(
                    storage.as_ref(),
                    &ds,
                    os,
                    ls,
                    file_len,
                    meta,
                    &v.name,
                    limits,
                )
            });
        out.push(match r {
            Ok(vc) => vc,
            Err(why) => unavailable(meta, &v.name, why),
        });
    }
    Ok(out)
}

/// numcodecs filters and compressor for an HDF5 filter pipeline.
fn codecs(
    pipeline: Option<&hdf5_reader::messages::filter_pipeline::FilterPipelineMessage>,
    elem: usize,
) -> Result<(Value, Value), String> {
    let mut filters = Vec::new();
    let mut compressor = Value::Null;
    for f in pipeline.map(|p| p.filters.as_slice()).unwrap_or_default() {
        if !compressor.is_null() {
            return Err(format!(
                "filter {} follows the compressor (only shuffle then deflate is supported)",
                f.id
            ));
        }
        match f.id {
            1 => {
                let level = f.client_data.first().copied().unwrap_or(6);
                compressor = json!({"id": "zlib", "level": level});
            }
            2 => filters.push(json!({"id": "shuffle", "elementsize": elem})),
            // Fletcher32 appends a 4-byte checksum numcodecs' zlib would not strip.
            id => {
                return Err(format!(
                    "HDF5 filter {id}{} has no numcodecs equivalent here",
                    f.name
                        .as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                ))
            }
        }
    }
    let filters = if filters.is_empty() {
        Value::Null
    } else {
        Value::Array(filters)
    };
    Ok((compressor, filters))
}

#[allow(clippy::too_many_arguments)]
fn hdf5_var(
    storage: &dyn Storage,
    ds: &hdf5_reader::Dataset,
    os: u8,
    ls: u8,
    file_len: u64,
    meta: &NcMeta,
    name: &str,
    limits: &Limits,
) -> Result<VarChunks, String> {
    let dtype = hdf5_dtype(ds.dtype())?;
    let elem = ds.raw_element_size().map_err(|e| e.to_string())?;
    let shape: Vec<u64> = ds.shape().to_vec();
    let header = ObjectHeader::parse_at_storage_with_limit(storage, ds.address(), os, ls, 1 << 20)
        .map_err(|e| format!("object header: {e}"))?;
    let mut layout = None;
    let mut pipeline = None;
    for m in &header.messages {
        match m {
            HdfMessage::DataLayout(l) => layout = Some(l.layout.clone()),
            HdfMessage::FilterPipeline(p) => pipeline = Some(p.clone()),
            _ => {}
        }
    }
    let layout = layout.ok_or("no data layout message")?;
    let (compressor, filters) = codecs(pipeline.as_ref(), elem)?;
    let in_file = |offset: u64, length: u64| -> Result<(), String> {
        match offset.checked_add(length) {
            Some(end) if end <= file_len => Ok(()),
            _ => Err(format!(
                "chunk at {offset}+{length} lies past the end of the file ({file_len} bytes)"
            )),
        }
    };
    let (chunk_shape, chunks) = match layout {
        DataLayout::Contiguous { address, size } => {
            if address == u64::MAX || size == 0 {
                return Err("contiguous variable with no stored data".into());
            }
            in_file(address, size)?;
            let index = vec![0; shape.len()];
            (
                shape.clone(),
                vec![ChunkRef {
                    index,
                    offset: address,
                    length: size,
                }],
            )
        }
        DataLayout::Compact { .. } => {
            return Err("compact storage (data inside the object header)".into())
        }
        DataLayout::Chunked {
            address,
            dims,
            chunk_indexing,
            ..
        } => {
            let ndim = shape.len();
            if dims.len() < ndim || dims.iter().take(ndim).any(|&d| d == 0) {
                return Err(format!(
                    "chunk dimensions {dims:?} do not fit shape {shape:?}"
                ));
            }
            let cshape: Vec<u64> = dims.iter().take(ndim).map(|&d| u64::from(d)).collect();
            let mut refs = Vec::new();
            let undefined = address == u64::MAX || (os < 8 && address == (1u64 << (8 * os)) - 1);
            match (&chunk_indexing, undefined) {
                (_, true) => {}
                (None, false) => {
                    let leaves = collect_btree_v1_leaves_storage(
                        storage,
                        address,
                        os,
                        ls,
                        Some(ndim as u32),
                        &dims,
                        None,
                    )
                    .map_err(|e| format!("chunk B-tree: {e}"))?;
                    if leaves.len() as u64 > limits.max_bytes_read / 16 {
                        return Err("chunk table larger than the read budget allows".into());
                    }
                    for (key, child) in leaves {
                        let BTreeV1Key::RawData {
                            chunk_size,
                            filter_mask,
                            offsets,
                        } = key
                        else {
                            return Err("chunk B-tree holds a group key".into());
                        };
                        if filter_mask != 0 {
                            return Err(format!(
                                "a chunk skips filters (mask {filter_mask:#x}); Zarr cannot say so"
                            ));
                        }
                        if offsets.len() < ndim {
                            return Err("chunk B-tree key has too few offsets".into());
                        }
                        let index: Vec<u64> = offsets
                            .iter()
                            .take(ndim)
                            .zip(&cshape)
                            .map(|(o, c)| o / c)
                            .collect();
                        in_file(child, u64::from(chunk_size))?;
                        refs.push(ChunkRef {
                            index,
                            offset: child,
                            length: u64::from(chunk_size),
                        });
                    }
                }
                (Some(ChunkIndexing::SingleChunk { filtered_size, .. }), false) => {
                    let length = if pipeline.is_some() {
                        *filtered_size
                    } else {
                        cshape.iter().product::<u64>() * elem as u64
                    };
                    in_file(address, length)?;
                    refs.push(ChunkRef {
                        index: vec![0; ndim],
                        offset: address,
                        length,
                    });
                }
                (Some(other), false) => {
                    return Err(format!(
                        "chunk index type {other:?} is not walked yet (only the v1 B-tree and single chunk)"
                    ))
                }
            }
            refs.sort_by(|a, b| a.index.cmp(&b.index));
            (cshape, refs)
        }
    };
    let zarray = json!({
        "zarr_format": 2,
        "shape": shape,
        "chunks": chunk_shape,
        "dtype": dtype,
        "compressor": compressor,
        "filters": filters,
        "fill_value": fill_json(meta, name),
        "order": "C",
    });
    Ok(VarChunks {
        name: name.to_string(),
        zarray: Some(zarray),
        zattrs: zattrs(meta, name),
        chunks,
        unavailable: None,
        values: None,
    })
}

// ---------------------------------------------------------------- netCDF-3

fn be(b: &[u8]) -> u64 {
    b.iter().fold(0, |acc, &x| (acc << 8) | u64::from(x))
}

/// netCDF-3: reads the header's variable list for each variable's `begin` (the reader
/// crate does not expose it) and describes fixed-size variables as one chunk.
fn classic_vars(
    source: Arc<dyn ReadAt>,
    meta: &NcMeta,
    file_len: u64,
) -> Result<Vec<VarChunks>, NcError> {
    let begins = classic_begins(source.as_ref(), meta.format).unwrap_or_default();
    let record_dims: Vec<&str> = meta
        .dims
        .iter()
        .filter(|d| d.unlimited)
        .map(|d| d.name.as_str())
        .collect();
    let mut out = Vec::new();
    for v in &meta.variables {
        let Some(dtype) = classic_dtype(&v.dtype) else {
            out.push(unavailable(meta, &v.name, format!("type {}", v.dtype)));
            continue;
        };
        if v.dims
            .first()
            .is_some_and(|d| record_dims.contains(&d.as_str()))
        {
            out.push(unavailable(
                meta,
                &v.name,
                "record variable (interleaved records are not indexed yet)".into(),
            ));
            continue;
        }
        let Some(&begin) = begins.get(&v.name) else {
            out.push(unavailable(
                meta,
                &v.name,
                "variable offset not found".into(),
            ));
            continue;
        };
        let size: u64 = v.shape.iter().product::<u64>() * dtype[2..].parse::<u64>().unwrap_or(1);
        if begin.checked_add(size).is_none_or(|e| e > file_len) {
            out.push(unavailable(
                meta,
                &v.name,
                format!("data at {begin}+{size} lies past the end of the file ({file_len} bytes)"),
            ));
            continue;
        }
        out.push(VarChunks {
            name: v.name.clone(),
            zarray: Some(json!({
                "zarr_format": 2,
                "shape": v.shape,
                "chunks": v.shape,
                "dtype": dtype,
                "compressor": null,
                "filters": null,
                "fill_value": fill_json(meta, &v.name),
                "order": "C",
            })),
            zattrs: zattrs(meta, &v.name),
            chunks: vec![ChunkRef {
                index: vec![0; v.shape.len()],
                offset: begin,
                length: size,
            }],
            unavailable: None,
            values: None,
        });
    }
    Ok(out)
}

/// Walks a classic header (bounded: at most 64 MiB read) for the variables' `begin`.
fn classic_begins(src: &dyn ReadAt, format: Format) -> Option<BTreeMap<String, u64>> {
    let len = src.len().min(64 << 20) as usize;
    let h = src.read_at(0, len).ok()?;
    let big = matches!(format, Format::Cdf5);
    let off64 = !matches!(format, Format::Classic);
    let mut p = 4usize;
    let take = |p: &mut usize, n: usize| -> Option<u64> {
        let b = h.get(*p..p.checked_add(n)?)?;
        *p += n;
        Some(be(b))
    };
    let count = |p: &mut usize| take(p, if big { 8 } else { 4 });
    let pad = |n: u64| n.div_ceil(4) * 4;
    take(&mut p, if big { 8 } else { 4 })?; // numrecs
    let skip_name = |p: &mut usize| -> Option<String> {
        let n = count(p)?;
        let s = h.get(*p..p.checked_add(n as usize)?)?;
        let name = String::from_utf8_lossy(s).into_owned();
        *p = p.checked_add(pad(n) as usize)?;
        Some(name)
    };
    let type_size = |t: u64| -> u64 {
        match t {
            1 | 2 | 7 => 1,
            3 | 8 => 2,
            4 | 5 | 9 => 4,
            _ => 8,
        }
    };
    let skip_attrs = |p: &mut usize| -> Option<()> {
        let tag = take(p, 4)?;
        let n = count(p)?;
        if tag == 0 && n == 0 {
            return Some(());
        }
        for _ in 0..n.min(1 << 20) {
            skip_name(p)?;
            let t = take(p, 4)?;
            let k = count(p)?;
            *p = p.checked_add(pad(k.checked_mul(type_size(t))?) as usize)?;
        }
        Some(())
    };
    // dim_list
    let tag = take(&mut p, 4)?;
    let n = count(&mut p)?;
    if tag != 0 || n != 0 {
        for _ in 0..n.min(1 << 20) {
            skip_name(&mut p)?;
            count(&mut p)?;
        }
    }
    skip_attrs(&mut p)?;
    let mut out = BTreeMap::new();
    let tag = take(&mut p, 4)?;
    let n = count(&mut p)?;
    if tag == 0 && n == 0 {
        return Some(out);
    }
    for _ in 0..n.min(1 << 20) {
        let name = skip_name(&mut p)?;
        let nd = count(&mut p)?;
        for _ in 0..nd.min(1 << 10) {
            count(&mut p)?;
        }
        skip_attrs(&mut p)?;
        take(&mut p, 4)?; // nc_type
        count(&mut p)?; // vsize
        let begin = take(&mut p, if off64 { 8 } else { 4 })?;
        out.insert(name, begin);
    }
    Some(out)
}
