//! Arrow decoding for `Producer.send_buffers`: the values (and keys and
//! timestamps) of an Arrow `binary`/`string` array read straight from its
//! buffers ([`ByteView`]) into a [`Batch`] of record bodies, with no Python
//! call per value. Every offset is checked against its buffer.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::buffer::ByteView;
use super::time::check_ms;
use crate::node::Batch;

/// The `n + 1` offsets of an Arrow binary array from their raw buffer.
fn arrow_offsets(raw: &[u8], large: bool, what: &str) -> PyResult<Vec<i64>> {
    let width = if large { 8 } else { 4 };
    if raw.len() % width != 0 {
        return Err(PyValueError::new_err(format!(
            "{what} holds {} bytes, not a whole number of {width}-byte offsets \
             (large={large})",
            raw.len()
        )));
    }
    Ok(raw
        .chunks_exact(width)
        .map(|c| match c.try_into() {
            Ok(b) => i64::from_ne_bytes(b),
            Err(_) => i64::from(i32::from_ne_bytes(c.try_into().expect("width is 4"))),
        })
        .collect())
}

/// The keys of an Arrow array, as `send_buffers` takes them.
pub(super) struct ArrowKeys<'a, 'py> {
    pub data: &'a Bound<'py, PyAny>,
    pub offsets: &'a Bound<'py, PyAny>,
    /// Offsets of 8 bytes (`large_binary`), not 4.
    pub large: bool,
    /// The validity bitmap: bit `bit_offset + i` clear, record `i` has no
    /// key (None: every record has one).
    pub validity: Option<&'a Bound<'py, PyAny>>,
    pub bit_offset: usize,
}

/// What `send_buffers` was given: the values of an Arrow array (`data`,
/// `offsets`, `large`), their keys and their create times (a buffer of `n`
/// native-endian int64 ms; None: `now`).
pub(super) struct ArrowValues<'a, 'py> {
    pub data: &'a Bound<'py, PyAny>,
    pub offsets: &'a Bound<'py, PyAny>,
    pub large: bool,
    pub keys: Option<ArrowKeys<'a, 'py>>,
    pub timestamps: Option<&'a Bound<'py, PyAny>>,
}

/// `[a, z)` of record `i` from `b`, checked to be within a `len`-byte buffer.
fn span(b: &[i64], i: usize, len: usize, what: &str) -> PyResult<(usize, usize)> {
    let (a, z) = (b[i], b[i + 1]);
    match (usize::try_from(a), usize::try_from(z)) {
        (Ok(a), Ok(z)) if a <= z && z <= len => Ok((a, z)),
        _ => Err(PyValueError::new_err(format!(
            "{what} must be non-decreasing and within the {len}-byte data buffer, got [{a}, {z})"
        ))),
    }
}

impl ArrowValues<'_, '_> {
    /// The records' bodies, in order, created at `now` unless `timestamps`
    /// says otherwise.
    pub(super) fn batch(&self, py: Python<'_>, now: u64) -> PyResult<Batch> {
        let data = ByteView::get(py, self.data, "data")?;
        let offs = ByteView::get(py, self.offsets, "offsets")?;
        let bounds = arrow_offsets(offs.bytes(), self.large, "offsets")?;
        let n = bounds.len().saturating_sub(1);
        let keys = match &self.keys {
            None => None,
            Some(k) => {
                let d = ByteView::get(py, k.data, "key_data")?;
                let o = ByteView::get(py, k.offsets, "key_offsets")?;
                let kb = arrow_offsets(o.bytes(), k.large, "key_offsets")?;
                if kb.len() != bounds.len() {
                    return Err(PyValueError::new_err(format!(
                        "key_offsets holds {} offsets, offsets {}: one key per value",
                        kb.len(),
                        bounds.len()
                    )));
                }
                let valid = k
                    .validity
                    .map(|v| ByteView::get(py, v, "key_validity"))
                    .transpose()?;
                Some((d, kb, valid, k.bit_offset))
            }
        };
        let times = match self.timestamps {
            None => None,
            Some(t) => {
                let t = ByteView::get(py, t, "timestamps")?;
                if t.bytes().len() != n * 8 {
                    return Err(PyValueError::new_err(format!(
                        "timestamps holds {} bytes; {n} values need {} (int64 each)",
                        t.bytes().len(),
                        n * 8
                    )));
                }
                Some(t)
            }
        };
        let values = data.bytes();
        let none: &[(&str, &[u8])] = &[];
        let mut batch = Batch::with_capacity(n, values.len() + n * crate::meta::PLAIN_LEN);
        for i in 0..n {
            let (a, z) = span(&bounds, i, values.len(), "offsets")?;
            let ts = match &times {
                Some(t) => {
                    let raw: [u8; 8] = t.bytes()[i * 8..i * 8 + 8].try_into().expect("8 bytes");
                    let v = i64::from_ne_bytes(raw);
                    let ms = u64::try_from(v).map_err(|_| {
                        PyValueError::new_err(format!("timestamps[{i}] is negative ({v})"))
                    })?;
                    check_ms(ms, &format!("timestamps[{i}]"))?
                }
                None => now,
            };
            let key = match &keys {
                None => None,
                Some((kd, kb, valid, bit_offset)) => {
                    let has = valid.as_ref().is_none_or(|v| {
                        let bit = bit_offset + i;
                        v.bytes()
                            .get(bit / 8)
                            .is_some_and(|b| b & (1 << (bit % 8)) != 0)
                    });
                    if has {
                        let (ka, kz) = span(kb, i, kd.bytes().len(), "key_offsets")?;
                        Some(&kd.bytes()[ka..kz])
                    } else {
                        None
                    }
                }
            };
            batch.push_body(ts, key, none, &values[a..z]);
        }
        Ok(batch)
    }
}
