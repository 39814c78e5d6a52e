//! What Python shows of the options ([`super::options`]): `_native.DEFAULTS`,
//! `_native._OPTIONS`, the signatures `inspect.signature` and `help()` show
//! (each entry point's `**options` spelt out as keyword-only parameters
//! with their defaults), and the class docstrings' "Parameters". Set up once
//! the module's classes and functions are registered ([`sign`]).

use std::ffi::CString;

use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyCFunction, PyDict, PyList, PyString, PyType};

use super::options::{defaults, described, with_parameters, Spec, ENTRIES};

/// The functions of [`ENTRIES`], in order: each is replaced by a signed one
/// ([`sign`]).
const FUNCTIONS: [&str; 10] = [
    "heads",
    "offsets",
    "fetch_range",
    "fetch_ranges",
    "check_node",
    "offsets_for_times",
    "topics",
    "list_groups",
    "describe_group",
    "cluster_view",
];

/// The PyO3 functions the signed ones forward to, by their index in [`FUNCTIONS`].
static TARGETS: [PyOnceLock<Py<PyAny>>; 10] = [const { PyOnceLock::new() }; 10];

/// The body of a signed function: calls its PyO3 function with the same
/// arguments.
///
/// # Safety
/// Called by CPython as a `METH_VARARGS | METH_KEYWORDS` function: attached to
/// the interpreter, `args` a tuple, `kwargs` a dict or NULL.
unsafe extern "C" fn forward<const I: usize>(
    _module: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
    kwargs: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls this attached to the interpreter.
    let py = unsafe { Python::assume_attached() };
    match TARGETS[I].get(py) {
        // SAFETY: a live function object and the arguments CPython passed;
        // PyObject_Call returns a new reference, or NULL with the error set.
        Some(f) => unsafe { ffi::PyObject_Call(f.as_ptr(), args, kwargs) },
        None => {
            PyRuntimeError::new_err("dafka._native is not initialised").restore(py);
            std::ptr::null_mut()
        }
    }
}

const FORWARDERS: [ffi::PyCFunctionWithKeywords; 10] = [
    forward::<0>,
    forward::<1>,
    forward::<2>,
    forward::<3>,
    forward::<4>,
    forward::<5>,
    forward::<6>,
    forward::<7>,
    forward::<8>,
    forward::<9>,
];

/// A `'static` C string, made once per process for a function's name and doc.
fn leak(s: String) -> PyResult<&'static std::ffi::CStr> {
    let c = CString::new(s).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok(Box::leak(c.into_boxed_c_str()))
}

/// `inspect.signature(obj)` with its `**options` spelt out: each option of
/// `specs` a keyword-only parameter with its default.
fn signature<'py>(
    inspect: &Bound<'py, PyModule>,
    obj: &Bound<'py, PyAny>,
    specs: &[Spec],
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let sig = inspect.call_method1("signature", (obj,))?;
    let parameter = inspect.getattr("Parameter")?;
    let (var_keyword, keyword_only) = (
        parameter.getattr("VAR_KEYWORD")?,
        parameter.getattr("KEYWORD_ONLY")?,
    );
    let params = PyList::empty(py);
    for p in sig
        .getattr("parameters")?
        .call_method0("values")?
        .try_iter()?
    {
        let p = p?;
        if !p.getattr("kind")?.eq(&var_keyword)? {
            params.append(p)?;
        }
    }
    for s in specs {
        let kw = PyDict::new(py);
        kw.set_item("default", (s.default)(py)?)?;
        params.append(parameter.call((s.name, &keyword_only), Some(&kw))?)?;
    }
    let kw = PyDict::new(py);
    kw.set_item("parameters", params)?;
    sig.call_method("replace", (), Some(&kw))
}

/// Adds `DEFAULTS` (read-only) and `_OPTIONS` to the module, and shows the
/// options in the signatures of its classes (as `__signature__`, and in
/// their docstrings' "Parameters") and functions (each replaced by a
/// function whose text signature has them, which calls the PyO3 one).
/// Called once the classes and functions are registered.
pub(super) fn sign(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let inspect = py.import("inspect")?;
    let all = PyDict::new(py);
    let mut signed = 0;
    for entry in &ENTRIES {
        let specs = (entry.specs)();
        all.set_item(entry.name, defaults(py, &specs)?)?;
        let target = m.getattr(entry.attr)?;
        let sig = signature(&inspect, &target, &specs)?;
        if entry.class {
            let cls = target.cast_into::<PyType>()?;
            let doc: Option<String> = cls.getattr("__doc__")?.extract()?;
            let doc = with_parameters(py, &doc.unwrap_or_default(), &specs)?;
            cls.setattr("__doc__", PyString::new(py, &doc))?;
            cls.setattr("__signature__", sig)?;
            continue;
        }
        let i = FUNCTIONS
            .iter()
            .position(|f| *f == entry.name)
            .ok_or_else(|| {
                PyRuntimeError::new_err(format!("{} is not in FUNCTIONS", entry.name))
            })?;
        let doc: Option<String> = target.getattr("__doc__")?.extract()?;
        let doc = format!(
            "{}{}\n--\n\n{}",
            entry.name,
            sig.str()?,
            doc.unwrap_or_default()
        );
        let (name_c, doc_c) = (leak(entry.name.to_string())?, leak(doc)?);
        let f = PyCFunction::new_with_keywords(py, FORWARDERS[i], name_c, doc_c, Some(m))?;
        // Set once per process: a second initialisation (a subinterpreter)
        // forwards to the first one's functions.
        let _ = TARGETS[i].set(py, target.unbind());
        m.setattr(entry.name, f)?;
        signed += 1;
    }
    if signed != FUNCTIONS.len() {
        return Err(PyRuntimeError::new_err(
            "a function of FUNCTIONS is not in ENTRIES",
        ));
    }
    // Read-only: `{entry: {keyword: default}}` as mappingproxies.
    let proxy = py.import("types")?.getattr("MappingProxyType")?;
    let frozen = PyDict::new(py);
    for (entry, defaults) in all.iter() {
        frozen.set_item(entry, proxy.call1((defaults,))?)?;
    }
    m.add("DEFAULTS", proxy.call1((frozen,))?)?;
    // Private: not in `__all__`.
    m.setattr("_OPTIONS", described(py)?)
}
