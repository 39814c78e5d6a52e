//! The defaults of the node classes and read clients, taken from the Rust
//! configs' `Default` impls: [`DEFAULT`] is what the `#[pyo3(signature)]`s
//! use, `_native.DEFAULTS` shows it to Python, and [`sign`] puts it in the
//! signatures `inspect.signature` and `help()` show (PyO3 writes `...` for a
//! default that is not a literal). `tests/test_defaults.py` checks that the
//! stubs and `docs/python.md` say the same.

use std::ffi::CString;
use std::sync::LazyLock;

use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyCFunction, PyDict, PyList, PyType};

use crate::log::{FsyncPolicy, LogConfig, RecoveryPolicy};
use crate::node::{
    ConsumerConfig, NodeConfig, OffsetReset, ProducerConfig, StoreConfig, TowerConfig,
};
use crate::security::Role;

/// The discovery keywords' defaults (see [`super::discovery::Discovery`]),
/// and the high-water marks of the nodes.
pub(crate) struct NodeDefaults {
    pub wire: &'static str,
    pub bind: String,
    pub beacon_interval: f64,
    pub beacon_timeout: f64,
    pub sndhwm: i128,
    pub rcvhwm: i128,
}

pub(crate) struct TowerDefaults {
    pub beacon_in: String,
    pub beacon_out: String,
}

pub(crate) struct ProducerDefaults {
    pub min_acks: i128,
    pub head_interval: f64,
    pub max_unacked_bytes: i128,
    pub max_record_bytes: i128,
    pub record_batches: bool,
    pub close_timeout: f64,
}

pub(crate) struct ConsumerDefaults {
    pub offset_reset: &'static str,
    pub fetch_retry: f64,
    pub max_fetch: i128,
    pub max_pending: i128,
    pub max_buffered: i128,
    pub max_buffered_bytes: i128,
    pub give_up_fetches: i128,
    pub idle_after: f64,
    pub forget_after: Option<f64>,
}

pub(crate) struct StoreDefaults {
    pub fsync: &'static str,
    pub flush_interval_ms: i128,
    pub flush_messages: i128,
    pub segment_bytes: i128,
    pub retain_hours: Option<i128>,
    pub retain_bytes: Option<i128>,
    pub recovery: &'static str,
    pub max_record_bytes: i128,
    pub fetch_retry: f64,
    pub max_open_files: Option<i128>,
    pub forget_parked_hours: Option<i128>,
}

/// `dafka.Log`'s (`LogConfig::default()`; a store's log differs, see
/// [`StoreDefaults`]).
pub(crate) struct LogDefaults {
    pub segment_bytes: i128,
    pub index_interval_bytes: i128,
    pub retain_hours: Option<i128>,
    pub retain_bytes: Option<i128>,
    pub flush_messages: i128,
    pub flush_interval_ms: i128,
    pub fsync: &'static str,
    pub recovery: &'static str,
    pub read_only: bool,
    pub isolate_damaged: bool,
    pub forget_parked_hours: Option<i128>,
}

/// Every default, as the Python arguments take it.
pub(crate) struct Defaults {
    pub node: NodeDefaults,
    pub tower: TowerDefaults,
    pub producer: ProducerDefaults,
    pub consumer: ConsumerDefaults,
    pub store: StoreDefaults,
    pub log: LogDefaults,
}

/// The defaults, read once from the configs' `Default` impls.
pub(crate) static DEFAULT: LazyLock<Defaults> = LazyLock::new(Defaults::from_configs);

fn fsync_name(p: FsyncPolicy) -> &'static str {
    match p {
        FsyncPolicy::Always => "always",
        FsyncPolicy::Interval => "interval",
        FsyncPolicy::Never => "never",
    }
}

fn recovery_name(p: RecoveryPolicy) -> &'static str {
    match p {
        RecoveryPolicy::TolerateTailCorruption => "tolerate_tail_corruption",
        RecoveryPolicy::AbsoluteConsistency => "absolute_consistency",
    }
}

fn offset_reset_name(r: OffsetReset) -> &'static str {
    match r {
        OffsetReset::Earliest => "earliest",
        OffsetReset::Latest => "latest",
    }
}

fn int(v: impl Into<u64>) -> i128 {
    i128::from(v.into())
}

impl Defaults {
    fn from_configs() -> Self {
        let n = NodeConfig::default();
        let t = TowerConfig::default();
        let p = ProducerConfig::default();
        let c = ConsumerConfig::default();
        let s = StoreConfig::default();
        let l = LogConfig::default();
        Self {
            node: NodeDefaults {
                wire: n.wire.name(),
                bind: n.bind,
                beacon_interval: n.beacon_interval.as_secs_f64(),
                beacon_timeout: n.beacon_timeout.as_secs_f64(),
                sndhwm: n.sndhwm.into(),
                rcvhwm: n.rcvhwm.into(),
            },
            tower: TowerDefaults {
                beacon_in: t.beacon_in,
                beacon_out: t.beacon_out,
            },
            producer: ProducerDefaults {
                min_acks: int(p.min_acks as u64),
                head_interval: p.head_interval.as_secs_f64(),
                max_unacked_bytes: int(p.max_unacked_bytes as u64),
                max_record_bytes: int(p.max_record_bytes as u64),
                record_batches: p.record_batches,
                close_timeout: p.close_timeout.as_secs_f64(),
            },
            consumer: ConsumerDefaults {
                offset_reset: offset_reset_name(c.offset_reset),
                fetch_retry: c.fetch_retry.as_secs_f64(),
                max_fetch: int(c.max_fetch),
                max_pending: int(c.max_pending as u64),
                max_buffered: int(c.max_buffered as u64),
                max_buffered_bytes: int(c.max_buffered_bytes as u64),
                give_up_fetches: int(c.give_up_fetches),
                idle_after: c.idle_after.as_secs_f64(),
                forget_after: c.forget_after.map(|d| d.as_secs_f64()),
            },
            store: StoreDefaults {
                fsync: fsync_name(s.log.fsync),
                flush_interval_ms: int(s.log.flush_interval_ms),
                flush_messages: int(s.log.flush_messages),
                segment_bytes: int(s.log.segment_bytes),
                retain_hours: s.log.retain_hours.map(int),
                retain_bytes: s.log.retain_bytes.map(int),
                recovery: recovery_name(s.log.recovery),
                max_record_bytes: int(s.state.max_record_bytes as u64),
                fetch_retry: s.state.fetch_retry.as_secs_f64(),
                max_open_files: s.log.max_open_files.map(|n| int(n as u64)),
                forget_parked_hours: s.log.forget_parked_hours.map(int),
            },
            log: LogDefaults {
                segment_bytes: int(l.segment_bytes),
                index_interval_bytes: int(l.index_interval_bytes),
                retain_hours: l.retain_hours.map(int),
                retain_bytes: l.retain_bytes.map(int),
                flush_messages: int(l.flush_messages),
                flush_interval_ms: int(l.flush_interval_ms),
                fsync: fsync_name(l.fsync),
                recovery: recovery_name(l.recovery),
                read_only: l.read_only,
                isolate_damaged: l.isolate_damaged,
                forget_parked_hours: l.forget_parked_hours.map(int),
            },
        }
    }

    /// `_native.DEFAULTS`: ``{entry point: {keyword: default}}`` for every
    /// keyword of the node classes, the read clients and `dafka.Log` that
    /// has a default, except the read clients' per-call ``timeout``,
    /// ``settle``, ``fail_on_loss``, ``partitions`` and ``exclude`` (literals
    /// of their signatures).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let none = py.None().into_bound(py);
        let n = &self.node;
        let discovery = |d: &Bound<'py, PyDict>| -> PyResult<()> {
            d.set_item("towers", &none)?;
            d.set_item("peers", &none)?;
            d.set_item("wire", n.wire)?;
            d.set_item("bind", &n.bind)?;
            d.set_item("beacon_interval", n.beacon_interval)?;
            d.set_item("beacon_timeout", n.beacon_timeout)?;
            d.set_item("advertise_host", &none)?;
            d.set_item("cert", &none)?;
            d.set_item("trust", &none)
        };
        let node = |d: &Bound<'py, PyDict>| -> PyResult<()> {
            discovery(d)?;
            d.set_item("sndhwm", n.sndhwm)?;
            d.set_item("rcvhwm", n.rcvhwm)
        };
        let out = PyDict::new(py);

        let d = PyDict::new(py);
        d.set_item("beacon_in", &self.tower.beacon_in)?;
        d.set_item("beacon_out", &self.tower.beacon_out)?;
        d.set_item("cert", &none)?;
        d.set_item("trust", &none)?;
        out.set_item("Tower", d)?;

        let (p, d) = (&self.producer, PyDict::new(py));
        node(&d)?;
        d.set_item("min_acks", p.min_acks)?;
        d.set_item("head_interval", p.head_interval)?;
        d.set_item("max_unacked_bytes", p.max_unacked_bytes)?;
        d.set_item("send_timeout", &none)?;
        d.set_item("on_delivery", &none)?;
        d.set_item("max_record_bytes", p.max_record_bytes)?;
        d.set_item("record_batches", p.record_batches)?;
        d.set_item("address_seed", &none)?;
        d.set_item("first_offset", &none)?;
        d.set_item("close_timeout", p.close_timeout)?;
        out.set_item("Producer", d)?;

        let (c, d) = (&self.consumer, PyDict::new(py));
        node(&d)?;
        d.set_item("offset_reset", c.offset_reset)?;
        d.set_item("fetch_retry", c.fetch_retry)?;
        d.set_item("max_fetch", c.max_fetch)?;
        d.set_item("max_pending", c.max_pending)?;
        d.set_item("max_buffered", c.max_buffered)?;
        d.set_item("max_buffered_bytes", c.max_buffered_bytes)?;
        d.set_item("give_up_fetches", c.give_up_fetches)?;
        d.set_item("start_offsets", &none)?;
        d.set_item("idle_after", c.idle_after)?;
        d.set_item("forget_after", c.forget_after)?;
        d.set_item("start_time", &none)?;
        out.set_item("Consumer", d)?;

        let (s, d) = (&self.store, PyDict::new(py));
        node(&d)?;
        d.set_item("fsync", s.fsync)?;
        d.set_item("flush_interval_ms", s.flush_interval_ms)?;
        d.set_item("flush_messages", s.flush_messages)?;
        d.set_item("segment_bytes", s.segment_bytes)?;
        d.set_item("retain_hours", s.retain_hours)?;
        d.set_item("retain_bytes", s.retain_bytes)?;
        d.set_item("recovery", s.recovery)?;
        d.set_item("max_record_bytes", s.max_record_bytes)?;
        d.set_item("fetch_retry", s.fetch_retry)?;
        d.set_item("max_open_files", s.max_open_files)?;
        d.set_item("forget_parked_hours", s.forget_parked_hours)?;
        out.set_item("Store", d)?;

        let d = PyDict::new(py);
        discovery(&d)?;
        d.set_item("forget_after", &none)?;
        out.set_item("HeadsWatch", d)?;

        let (l, d) = (&self.log, PyDict::new(py));
        d.set_item("segment_bytes", l.segment_bytes)?;
        d.set_item("index_interval_bytes", l.index_interval_bytes)?;
        d.set_item("retain_hours", l.retain_hours)?;
        d.set_item("retain_bytes", l.retain_bytes)?;
        d.set_item("flush_messages", l.flush_messages)?;
        d.set_item("flush_interval_ms", l.flush_interval_ms)?;
        d.set_item("fsync", l.fsync)?;
        d.set_item("recovery", l.recovery)?;
        d.set_item("read_only", l.read_only)?;
        d.set_item("isolate_damaged", l.isolate_damaged)?;
        d.set_item("forget_parked_hours", l.forget_parked_hours)?;
        out.set_item("Log", d)?;

        for f in FUNCTIONS {
            let d = PyDict::new(py);
            discovery(&d)?;
            if f == "check_node" {
                // The role whose certificate `cert` must be: a read client's.
                d.set_item("role", Role::Consumer.name())?;
            }
            out.set_item(f, d)?;
        }
        Ok(out)
    }
}

/// The classes [`sign`] gives a signature with the defaults, and their entry
/// in `DEFAULTS` (`NativeLog` is `dafka.Log`'s handle).
const CLASSES: [(&str, &str); 6] = [
    ("Tower", "Tower"),
    ("Producer", "Producer"),
    ("Consumer", "Consumer"),
    ("Store", "Store"),
    ("HeadsWatch", "HeadsWatch"),
    ("NativeLog", "Log"),
];

/// The read-client functions [`sign`] gives a signature with the defaults.
const FUNCTIONS: [&str; 7] = [
    "heads",
    "offsets",
    "fetch_range",
    "fetch_ranges",
    "check_node",
    "offsets_for_times",
    "topics",
];

/// The PyO3 functions the signed ones forward to, by their index in [`FUNCTIONS`].
static TARGETS: [PyOnceLock<Py<PyAny>>; 7] = [const { PyOnceLock::new() }; 7];

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

const FORWARDERS: [ffi::PyCFunctionWithKeywords; 7] = [
    forward::<0>,
    forward::<1>,
    forward::<2>,
    forward::<3>,
    forward::<4>,
    forward::<5>,
    forward::<6>,
];

/// A `'static` C string, made once per process for a function's name and doc.
fn leak(s: String) -> PyResult<&'static std::ffi::CStr> {
    let c = CString::new(s).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok(Box::leak(c.into_boxed_c_str()))
}

/// `inspect.signature(obj)` with each `...` default (a default PyO3 could not
/// write: an expression of [`DEFAULT`]) replaced by its value in `defaults`.
fn signature<'py>(
    inspect: &Bound<'py, PyModule>,
    obj: &Bound<'py, PyAny>,
    defaults: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let sig = inspect.call_method1("signature", (obj,))?;
    let params = PyList::empty(py);
    for p in sig
        .getattr("parameters")?
        .call_method0("values")?
        .try_iter()?
    {
        let p = p?;
        if p.getattr("default")?.is(py.Ellipsis()) {
            let name = p.getattr("name")?;
            let value = defaults.get_item(&name)?.ok_or_else(|| {
                PyRuntimeError::new_err(format!("no default for {name} in DEFAULTS"))
            })?;
            let kw = PyDict::new(py);
            kw.set_item("default", value)?;
            params.append(p.call_method("replace", (), Some(&kw))?)?;
        } else {
            params.append(p)?;
        }
    }
    let kw = PyDict::new(py);
    kw.set_item("parameters", params)?;
    sig.call_method("replace", (), Some(&kw))
}

/// Adds `DEFAULTS` (read-only) to the module and puts the defaults in the signatures of
/// its node classes (as `__signature__`) and read-client functions (each
/// replaced by a function whose text signature has them, which calls the
/// PyO3 one). Called once the classes and functions are registered.
pub(super) fn sign(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let all = DEFAULT.to_dict(py)?;
    let inspect = py.import("inspect")?;
    let defaults_of = |entry: &str| -> PyResult<Bound<'_, PyDict>> {
        let d = all
            .get_item(entry)?
            .ok_or_else(|| PyRuntimeError::new_err(format!("no {entry} in DEFAULTS")))?;
        Ok(d.cast_into()?)
    };
    for (cls, entry) in CLASSES {
        let obj = m.getattr(cls)?.cast_into::<PyType>()?;
        let sig = signature(&inspect, &obj, &defaults_of(entry)?)?;
        obj.setattr("__signature__", sig)?;
    }
    for (i, name) in FUNCTIONS.into_iter().enumerate() {
        let target = m.getattr(name)?;
        let sig = signature(&inspect, &target, &defaults_of(name)?)?;
        let doc: Option<String> = target.getattr("__doc__")?.extract()?;
        let doc = format!("{name}{}\n--\n\n{}", sig.str()?, doc.unwrap_or_default());
        let (name_c, doc_c) = (leak(name.to_string())?, leak(doc)?);
        let signed = PyCFunction::new_with_keywords(py, FORWARDERS[i], name_c, doc_c, Some(m))?;
        // Set once per process: a second initialisation (a subinterpreter)
        // forwards to the first one's functions.
        let _ = TARGETS[i].set(py, target.unbind());
        m.setattr(name, signed)?;
    }
    // Read-only: `{entry: {keyword: default}}` as mappingproxies.
    let proxy = py.import("types")?.getattr("MappingProxyType")?;
    let frozen = PyDict::new(py);
    for (entry, defaults) in all.iter() {
        frozen.set_item(entry, proxy.call1((defaults,))?)?;
    }
    m.add("DEFAULTS", proxy.call1((frozen,))?)
}
