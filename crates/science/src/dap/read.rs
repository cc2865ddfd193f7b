//! The values of a pick: read with the parser's own hyperslab read (only the chunks,
//! or the byte ranges of a netCDF-3 file, the hyperslab touches) and written in
//! DAP2's XDR form: arrays as their length twice then the values (Byte packed to a
//! multiple of four bytes, Int16/UInt16 widened to four bytes), string arrays as
//! their length once then each string (length, bytes, padding); scalars without a
//! length.

use netcdf_reader::{NcFile, NcReadable, NcSliceInfo, NcSliceInfoElem};

use super::ce::Slab;
use super::model::{DapError, DapVar, Stored};

/// The values of one array or scalar, in the file's type.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    I8(Vec<i8>),
    U8(Vec<u8>),
    I16(Vec<i16>),
    U16(Vec<u16>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Str(Vec<String>),
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::I8(v) => v.len(),
            Column::U8(v) => v.len(),
            Column::I16(v) => v.len(),
            Column::U16(v) => v.len(),
            Column::I32(v) => v.len(),
            Column::U32(v) => v.len(),
            Column::F32(v) => v.len(),
            Column::F64(v) => v.len(),
            Column::Str(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th value as the ASCII response writes it.
    pub fn text(&self, i: usize) -> String {
        match self {
            Column::I8(v) => v[i].to_string(),
            Column::U8(v) => v[i].to_string(),
            Column::I16(v) => v[i].to_string(),
            Column::U16(v) => v[i].to_string(),
            Column::I32(v) => v[i].to_string(),
            Column::U32(v) => v[i].to_string(),
            Column::F32(v) => super::model::float_text(v[i]),
            Column::F64(v) => super::model::float_text(v[i]),
            Column::Str(v) => super::model::quote(&v[i]),
        }
    }
}

/// Turns a read failure into a DAP error: a source that could not be read is a
/// passing condition (503); anything else is the file's (422).
pub fn read_error(name: &str, e: netcdf_reader::Error) -> DapError {
    let text = e.to_string();
    let lower = text.to_ascii_lowercase();
    if lower.contains("deadline passed")
        || lower.contains("no answer within")
        || lower.contains("i/o")
        || lower.contains("io error")
    {
        DapError::Temporary(format!("reading {name}: {text}"))
    } else if lower.contains("budget") {
        DapError::TooLarge(format!("reading {name}: {text}"))
    } else {
        DapError::Unreadable(format!("reading {name}: {text}"))
    }
}

fn slice_of(slabs: &[Slab]) -> NcSliceInfo {
    NcSliceInfo {
        selections: slabs
            .iter()
            .map(|s| NcSliceInfoElem::Slice {
                start: s.start,
                end: s.start + (s.count - 1) * s.stride + 1,
                step: s.stride,
            })
            .collect(),
    }
}

fn typed<T: NcReadable + Copy>(
    file: &NcFile,
    v: &DapVar,
    slabs: &[Slab],
    want: u64,
) -> Result<Vec<T>, DapError> {
    if want == 0 {
        return Ok(Vec::new());
    }
    let a = if slabs.is_empty() {
        file.read_variable::<T>(&v.name)
    } else {
        file.read_variable_slice::<T>(&v.name, &slice_of(slabs))
    }
    .map_err(|e| read_error(&v.name, e))?;
    let out: Vec<T> = a.iter().copied().collect();
    if out.len() as u64 != want {
        return Err(DapError::Unreadable(format!(
            "{}: the reader gave {} values for a hyperslab of {want}",
            v.name,
            out.len()
        )));
    }
    Ok(out)
}

/// The elements of a row-major array of `shape` that `slabs` pick, in order.
fn pick<T: Clone>(all: &[T], shape: &[u64], slabs: &[Slab]) -> Result<Vec<T>, DapError> {
    let n: u64 = slabs.iter().map(|s| s.count).product();
    let mut out = Vec::with_capacity(n as usize);
    if n == 0 {
        return Ok(out);
    }
    let mut idx = vec![0u64; slabs.len()];
    loop {
        let mut flat = 0u64;
        for (k, s) in slabs.iter().enumerate() {
            flat = flat * shape[k] + s.at(idx[k]);
        }
        out.push(
            all.get(flat as usize)
                .cloned()
                .ok_or_else(|| DapError::Unreadable("fewer strings than the shape says".into()))?,
        );
        let mut k = slabs.len();
        loop {
            if k == 0 {
                return Ok(out);
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < slabs[k].count {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// Reads the hyperslab `slabs` (one per DAP dimension) of `v`.
pub fn column(file: &NcFile, v: &DapVar, slabs: &[Slab]) -> Result<Column, DapError> {
    let want: u64 = slabs.iter().map(|s| s.count).product();
    Ok(match v.stored {
        Stored::I8 => Column::I8(typed(file, v, slabs, want)?),
        Stored::U8 => Column::U8(typed(file, v, slabs, want)?),
        Stored::I16 => Column::I16(typed(file, v, slabs, want)?),
        Stored::U16 => Column::U16(typed(file, v, slabs, want)?),
        Stored::I32 => Column::I32(typed(file, v, slabs, want)?),
        Stored::U32 => Column::U32(typed(file, v, slabs, want)?),
        Stored::F32 => Column::F32(typed(file, v, slabs, want)?),
        Stored::F64 => Column::F64(typed(file, v, slabs, want)?),
        Stored::Char | Stored::Str => {
            if want == 0 {
                return Ok(Column::Str(Vec::new()));
            }
            // Strings are read whole (the caller bounded their size) and picked here.
            let all = if v.stored == Stored::Char && v.nc_shape.len() <= 1 {
                vec![file
                    .read_variable_as_string(&v.name)
                    .map_err(|e| read_error(&v.name, e))?]
            } else {
                file.read_variable_as_strings(&v.name)
                    .map_err(|e| read_error(&v.name, e))?
            };
            let all: Vec<String> = all
                .into_iter()
                .map(|s| s.trim_end_matches('\0').to_string())
                .collect();
            let shape: Vec<u64> = v.dims.iter().map(|d| d.1).collect();
            Column::Str(pick(&all, &shape, slabs)?)
        }
    })
}

fn pad(out: &mut Vec<u8>) {
    while out.len() % 4 != 0 {
        out.push(0);
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
    pad(out);
}

/// Appends `c` in XDR: a scalar when `scalar`, else an array.
pub fn encode(c: &Column, scalar: bool, out: &mut Vec<u8>) {
    let n = c.len() as u32;
    if !scalar {
        out.extend_from_slice(&n.to_be_bytes());
        if !matches!(c, Column::Str(_)) {
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
    match c {
        Column::I8(v) => {
            out.extend(v.iter().map(|&x| x as u8));
            pad(out);
        }
        Column::U8(v) => {
            out.extend_from_slice(v);
            pad(out);
        }
        Column::I16(v) => v
            .iter()
            .for_each(|&x| out.extend_from_slice(&i32::from(x).to_be_bytes())),
        Column::U16(v) => v
            .iter()
            .for_each(|&x| out.extend_from_slice(&u32::from(x).to_be_bytes())),
        Column::I32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
        Column::U32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
        Column::F32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
        Column::F64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
        Column::Str(v) => v.iter().for_each(|s| put_str(out, s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdr_forms() {
        let mut o = Vec::new();
        encode(&Column::I8(vec![-1, 2, 3]), false, &mut o);
        assert_eq!(o, [0, 0, 0, 3, 0, 0, 0, 3, 255, 2, 3, 0]);
        o.clear();
        encode(&Column::U8(vec![7]), true, &mut o);
        assert_eq!(o, [7, 0, 0, 0]);
        o.clear();
        encode(&Column::I16(vec![-2]), false, &mut o);
        assert_eq!(o, [0, 0, 0, 1, 0, 0, 0, 1, 255, 255, 255, 254]);
        o.clear();
        encode(&Column::F64(vec![1.0]), true, &mut o);
        assert_eq!(o, 1.0f64.to_be_bytes());
        o.clear();
        encode(&Column::Str(vec!["ab".into(), "".into()]), false, &mut o);
        assert_eq!(o, [0, 0, 0, 2, 0, 0, 0, 2, b'a', b'b', 0, 0, 0, 0, 0, 0]);
        o.clear();
        encode(&Column::Str(vec!["abcd".into()]), true, &mut o);
        assert_eq!(o, [0, 0, 0, 4, b'a', b'b', b'c', b'd']);
    }

    #[test]
    fn picking_strided_elements() {
        let all: Vec<u32> = (0..24).collect();
        let s = [
            Slab {
                start: 1,
                stride: 1,
                count: 1,
            },
            Slab {
                start: 0,
                stride: 2,
                count: 2,
            },
            Slab {
                start: 3,
                stride: 1,
                count: 1,
            },
        ];
        assert_eq!(pick(&all, &[2, 3, 4], &s).unwrap(), vec![15, 23]);
    }
}
