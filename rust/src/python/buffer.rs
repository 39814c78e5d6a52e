//! Record values and keys as Python gives them: `bytes` (the fast path), or
//! any object with the buffer protocol (`bytearray`, `memoryview`,
//! `pyarrow.Buffer`...), read through [`ByteView`] (the buffer FFI). A `str`
//! gets a TypeError that says to encode it.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// A record's key as Python gives it: None, or bytes (any bytes-like object).
pub(super) fn key_arg(py: Python<'_>, key: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<u8>>> {
    match key {
        None => Ok(None),
        Some(k) if k.is_none() => Ok(None),
        Some(k) => value_bytes(py, k, "key").map(Some),
    }
}

/// A copy of the bytes of a value (`bytes` or any bytes-like object).
pub(super) fn value_bytes(py: Python<'_>, v: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    with_value(py, v, what, <[u8]>::to_vec)
}

/// Calls `f` with the bytes of a value (`bytes` or any bytes-like object).
pub(super) fn with_value<R>(
    py: Python<'_>,
    v: &Bound<'_, PyAny>,
    what: &str,
    f: impl FnOnce(&[u8]) -> R,
) -> PyResult<R> {
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(f(b.as_bytes()));
    }
    if v.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} takes bytes, got a str: encode it first, e.g. value.encode()"
        )));
    }
    let type_name = || {
        v.get_type()
            .name()
            .map_or_else(|_| "?".into(), |n| n.to_string())
    };
    match ByteView::get(py, v, what) {
        Ok(view) => Ok(f(view.bytes())),
        Err(e) if e.is_instance_of::<PyTypeError>(py) => Err(PyTypeError::new_err(format!(
            "{what} takes bytes or a bytes-like object (bytearray, memoryview), got {}",
            type_name()
        ))),
        Err(e) => Err(e),
    }
}

/// The bytes of an object with the buffer protocol, whatever its item format
/// (`B`, `b` as pyarrow exports its buffers, `i` of an `array('i')`, a numpy
/// array's): a record value is its raw bytes. Taken as a simple (C-contiguous,
/// byte-addressed) buffer.
pub(super) struct ByteView(Box<pyo3::ffi::Py_buffer>);

impl ByteView {
    pub(super) fn get(py: Python<'_>, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Self> {
        // SAFETY: a zeroed Py_buffer is what PyObject_GetBuffer fills in.
        let mut view = Box::new(unsafe { std::mem::zeroed::<pyo3::ffi::Py_buffer>() });
        // SAFETY: `obj` is a live object (the GIL is held); on success the
        // buffer is released by `Drop`.
        let rc = unsafe {
            pyo3::ffi::PyObject_GetBuffer(obj.as_ptr(), &mut *view, pyo3::ffi::PyBUF_SIMPLE)
        };
        if rc != 0 {
            let err = PyErr::fetch(py);
            if err.is_instance_of::<pyo3::exceptions::PyBufferError>(py) {
                return Err(PyValueError::new_err(format!(
                    "{what} must be a contiguous buffer ({err}); copy it first, e.g. bytes(value)"
                )));
            }
            return Err(PyTypeError::new_err(format!(
                "{what} must be a bytes-like buffer (bytes, memoryview, pyarrow.Buffer)"
            )));
        }
        Ok(Self(view))
    }

    pub(super) fn bytes(&self) -> &[u8] {
        let len = usize::try_from(self.0.len).unwrap_or(0);
        if len == 0 || self.0.buf.is_null() {
            return &[];
        }
        // SAFETY: a simple buffer is `len` contiguous bytes at `buf`, pinned
        // by the exporter until `Drop` releases it.
        unsafe { std::slice::from_raw_parts(self.0.buf.cast::<u8>(), len) }
    }
}

impl Drop for ByteView {
    fn drop(&mut self) {
        // SAFETY: the buffer was filled by a successful PyObject_GetBuffer and
        // is released once, with the GIL held.
        Python::attach(|_| unsafe { pyo3::ffi::PyBuffer_Release(&mut *self.0) });
    }
}
