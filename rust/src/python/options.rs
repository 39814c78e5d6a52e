//! The keyword options of the node classes, the read clients and
//! `dafka.Log`, each declared once: [`options!`] takes a struct whose fields
//! are the options, each with its Rust type (an [`Arg`]: what Python passes,
//! how it is checked, its annotation), its default and its `///` paragraph.
//! From that one declaration come:
//!
//! - the parsing of an entry point's `**options` ([`Options::parse`]): an
//!   unknown keyword is a `TypeError`, as Python's own;
//! - `_native.DEFAULTS` and the signatures `inspect.signature` and `help()`
//!   show ([`super::signature`]);
//! - the "Parameters" of the class docstrings ([`parameters_doc`]);
//! - through `_native._OPTIONS`, what `scripts/gen_api.py` writes into the
//!   stub (`_native.pyi`), the option tables of `docs/python.md` and
//!   `dafka.Log`'s signature (CI re-runs it and fails on a difference).
//!
//! Docstrings have one source, the Rust doc text: the stub's are generated
//! from it. (pydantic-core keeps its docs in the `.pyi` only, but then
//! `help()` shows none; here `help(dafka.Producer)` shows them, and the
//! option paragraphs sit beside their declaration.)
//!
//! Adding an option is: its field in a declaration (the struct of its
//! entry point, or [`super::discovery::Discovery`] for every node), its use
//! where the entry point builds its config, and its test; then
//! `python scripts/gen_api.py` regenerates the stub and docs.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// One keyword option, as declared.
pub(crate) struct Spec {
    pub name: &'static str,
    /// The declaration it is a field of (`Discovery`, `ProducerOptions`,
    /// ...): the docs' tables group options by it.
    pub group: &'static str,
    /// The Python annotation ([`super::args::Arg::annotation`]).
    pub annotation: fn() -> String,
    /// Its `///` lines, each with the space after `///`.
    pub doc: &'static str,
    /// The default, as Python shows it.
    pub default: for<'py> fn(Python<'py>) -> PyResult<Bound<'py, PyAny>>,
}

impl Spec {
    /// The doc paragraph, its lines as written.
    pub fn paragraph(&self) -> String {
        let lines: Vec<&str> = self
            .doc
            .lines()
            .map(|l| l.strip_prefix(' ').unwrap_or(l))
            .collect();
        lines.join("\n")
    }
}

/// A declaration of options ([`options!`] implements it).
pub(crate) trait Options: Sized {
    /// The options, in the order the signatures show them.
    fn specs(out: &mut Vec<Spec>);

    /// Reads the options from `kw`, each absent one at its default.
    fn take(kw: &mut Kwargs<'_, '_>) -> PyResult<Self>;

    /// The options of entry point `entry` from its `**options`: a keyword
    /// it does not declare is a `TypeError` naming it.
    fn parse(entry: &str, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut kw = Kwargs {
            dict: options,
            taken: 0,
        };
        let parsed = Self::take(&mut kw)?;
        kw.finish::<Self>(entry)?;
        Ok(parsed)
    }
}

/// Every spec of a declaration.
pub(crate) fn specs_of<O: Options>() -> Vec<Spec> {
    let mut out = Vec::new();
    O::specs(&mut out);
    out
}

/// The `**options` an entry point received, read one option at a time.
pub(crate) struct Kwargs<'a, 'py> {
    dict: Option<&'a Bound<'py, PyDict>>,
    /// How many keywords were read: fewer than given means one is unknown.
    taken: usize,
}

impl Kwargs<'_, '_> {
    /// Option `name`: read by `read` when given, else `default()`. A
    /// `TypeError` names the argument, as PyO3 names its own.
    pub fn take<T>(
        &mut self,
        name: &str,
        default: impl FnOnce() -> T,
        read: fn(&str, &Bound<'_, PyAny>) -> PyResult<T>,
    ) -> PyResult<T> {
        let Some(given) = self.dict.map(|d| d.get_item(name)).transpose()?.flatten() else {
            return Ok(default());
        };
        self.taken += 1;
        read(name, &given).map_err(|e| {
            let py = given.py();
            if e.is_instance_of::<PyTypeError>(py) {
                let named = PyTypeError::new_err(format!("argument '{name}': {}", e.value(py)));
                named.set_cause(py, Some(e));
                named
            } else {
                e
            }
        })
    }

    /// Refuses a keyword that `O` does not declare.
    fn finish<O: Options>(&self, entry: &str) -> PyResult<()> {
        let Some(d) = self.dict else { return Ok(()) };
        if d.len() == self.taken {
            return Ok(());
        }
        let known = specs_of::<O>();
        for k in d.keys() {
            let k: String = k.extract()?;
            if !known.iter().any(|s| s.name == k) {
                return Err(PyTypeError::new_err(format!(
                    "{entry}() got an unexpected keyword argument '{k}'"
                )));
            }
        }
        Ok(())
    }
}

/// Declares a struct of keyword options and implements [`Options`] for it.
///
/// ```ignore
/// options! {
///     /// What the struct is.
///     pub(crate) struct ProducerOptions {
///         ..discovery: Discovery,     // every option of another declaration
///         /// The doc paragraph (the first sentence is the docs' table cell).
///         min_acks: usize = PRODUCER.min_acks,
///         /// A type whose `Arg::extract` is not the reading wanted:
///         retain_hours: Option<u64> = None => args::retain_hours,
///     }
/// }
/// ```
///
/// Groups (`..name: Type`) come before or after the options (at least one
/// of its own); the signatures show the options in the order written.
macro_rules! options {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident {
            $(.. $pre:ident: $pre_ty:ty,)*
            $(
                $(#[doc = $doc:literal])+
                $field:ident: $ty:ty = $default:expr $(=> $read:expr)?,
            )+
            $(.. $post:ident: $post_ty:ty,)*
        }
    ) => {
        $(#[$attr])*
        $vis struct $name {
            $(pub $pre: $pre_ty,)*
            $($(#[doc = $doc])+ pub $field: $ty,)*
            $(pub $post: $post_ty,)*
        }

        impl $crate::python::options::Options for $name {
            fn specs(out: &mut Vec<$crate::python::options::Spec>) {
                $(<$pre_ty as $crate::python::options::Options>::specs(out);)*
                $(out.push($crate::python::options::Spec {
                    name: stringify!($field),
                    group: stringify!($name),
                    annotation: <$ty as $crate::python::args::Arg>::annotation,
                    doc: concat!($($doc, "\n"),+),
                    default: |py| {
                        let d: $ty = $default;
                        <$ty as $crate::python::args::Arg>::to_py(&d, py)
                    },
                });)*
                $(<$post_ty as $crate::python::options::Options>::specs(out);)*
            }

            fn take(
                kw: &mut $crate::python::options::Kwargs<'_, '_>,
            ) -> pyo3::PyResult<Self> {
                Ok(Self {
                    $($pre: <$pre_ty as $crate::python::options::Options>::take(kw)?,)*
                    $($field: kw.take(
                        stringify!($field),
                        || -> $ty { $default },
                        $crate::python::options::options!(@read $ty $(, $read)?),
                    )?,)*
                    $($post: <$post_ty as $crate::python::options::Options>::take(kw)?,)*
                })
            }
        }
    };
    (@read $ty:ty) => {
        <$ty as $crate::python::args::Arg>::extract
    };
    (@read $ty:ty, $read:expr) => {
        $read
    };
}
pub(crate) use options;

/// A class or function of `_native` that takes options: its entry in
/// `DEFAULTS`, its name in the module, and its declaration.
pub(crate) struct Entry {
    pub name: &'static str,
    pub attr: &'static str,
    pub specs: fn() -> Vec<Spec>,
    /// A class (its `__doc__` gets the options' "Parameters").
    pub class: bool,
}

const fn class(name: &'static str, attr: &'static str, specs: fn() -> Vec<Spec>) -> Entry {
    Entry {
        name,
        attr,
        specs,
        class: true,
    }
}

const fn function(name: &'static str, specs: fn() -> Vec<Spec>) -> Entry {
    Entry {
        name,
        attr: name,
        specs,
        class: false,
    }
}

/// Every entry point with options.
pub(crate) const ENTRIES: [Entry; 16] = {
    use super::discovery::{CheckNodeOptions, Discovery};
    [
        class("Tower", "Tower", specs_of::<super::tower::TowerOptions>),
        class(
            "Producer",
            "Producer",
            specs_of::<super::producer::ProducerOptions>,
        ),
        class(
            "Consumer",
            "Consumer",
            specs_of::<super::consumer::ConsumerOptions>,
        ),
        class("Store", "Store", specs_of::<super::store::StoreOptions>),
        class(
            "HeadsWatch",
            "HeadsWatch",
            specs_of::<super::fetch::HeadsWatchOptions>,
        ),
        class("Log", "NativeLog", specs_of::<super::log::LogOptions>),
        function("heads", specs_of::<Discovery>),
        function("offsets", specs_of::<Discovery>),
        function("fetch_range", specs_of::<Discovery>),
        function("fetch_ranges", specs_of::<Discovery>),
        function("check_node", specs_of::<CheckNodeOptions>),
        function("offsets_for_times", specs_of::<Discovery>),
        function("topics", specs_of::<Discovery>),
        function("list_groups", specs_of::<Discovery>),
        function("describe_group", specs_of::<Discovery>),
        function("cluster_view", specs_of::<Discovery>),
    ]
};

/// `{option: default}` of `specs`.
pub(crate) fn defaults<'py>(py: Python<'py>, specs: &[Spec]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for s in specs {
        d.set_item(s.name, (s.default)(py)?)?;
    }
    Ok(d)
}

/// `_native._OPTIONS`: `{entry: ((option, group, annotation, doc), ...)}`,
/// what `scripts/gen_api.py` writes the stub and the docs' tables from.
pub(crate) fn described(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for e in &ENTRIES {
        let rows: Vec<Bound<'_, PyTuple>> = (e.specs)()
            .iter()
            .map(|s| {
                PyTuple::new(
                    py,
                    [
                        s.name.to_string(),
                        s.group.to_string(),
                        (s.annotation)(),
                        s.paragraph(),
                    ],
                )
            })
            .collect::<PyResult<_>>()?;
        out.set_item(e.name, PyTuple::new(py, rows)?)?;
    }
    Ok(out)
}

/// The numpy-style "Parameters" entries of `specs`: ``name : annotation,
/// default VALUE`` and the paragraph, indented.
pub(crate) fn parameters_doc(py: Python<'_>, specs: &[Spec]) -> PyResult<String> {
    let mut out = String::new();
    for s in specs {
        let default = (s.default)(py)?.repr()?;
        out.push_str(&format!(
            "{} : {}, default {default}\n",
            s.name,
            (s.annotation)()
        ));
        for line in s.paragraph().lines() {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(out)
}

/// `doc` (a class's Rust doc text) with the entries of `specs` at the end of
/// its "Parameters" section (after its positional parameters), the section
/// made before the first other section (or at the end) when it has none.
pub(crate) fn with_parameters(py: Python<'_>, doc: &str, specs: &[Spec]) -> PyResult<String> {
    let params = parameters_doc(py, specs)?;
    let lines: Vec<&str> = doc.lines().collect();
    // Each section starts with its title, followed by a line of dashes.
    let titles: Vec<usize> = (0..lines.len().saturating_sub(1))
        .filter(|&i| !lines[i].is_empty() && !lines[i + 1].is_empty())
        .filter(|&i| lines[i + 1].chars().all(|c| c == '-'))
        .collect();
    let ours = titles.iter().position(|&i| lines[i] == "Parameters");
    let (at, head) = match ours {
        Some(k) => (titles.get(k + 1).copied(), ""),
        None => (titles.first().copied(), "Parameters\n----------\n"),
    };
    let (before, after) = match at {
        Some(i) => (
            lines[..i].join("\n"),
            format!("\n{}", lines[i..].join("\n")),
        ),
        None => (lines.join("\n"), String::new()),
    };
    let sep = if head.is_empty() { "\n" } else { "\n\n" };
    Ok(format!("{}{sep}{head}{params}{after}", before.trim_end()))
}
