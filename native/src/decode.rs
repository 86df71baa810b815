//! PyO3 glue of the receiver's decode: request bytes -> the `Decoded` records decode.py makes,
//! and for the few spans the conventions must look at, the attribute values they read.
//! Python (receiver/ingest/decode_native.py) finishes those spans with decode.py's own code, so the
//! conventions are read in one place.

use std::collections::HashMap;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyList, PyString, PyTuple};

use crate::otlp::{self, Attr, KeyMap, Plans, SpanView, Value};

/// any_value's depth bound (otlp/values.py MAX_VALUE_DEPTH): an array or map deeper is None.
const MAX_VALUE_DEPTH: u32 = 32;

/// The tables decode.py derives from the conventions, and the record class, handed over once.
#[pyclass(frozen, module = "otel_loopguard_native")]
struct DecodeTables {
    plans: Plans,
    result_keys: Vec<String>,
    result_prefixes: Vec<String>,
    langgraph_keys: Vec<String>,
    run_id_key: String,
    decision: String,
    decoded: Py<PyAny>,
    /// Keys found by shape (receiver/ingest/scans.py) in a span with a plan whose marker is one
    /// of the values: (marker, marker values, prefixes, suffix, cap).
    scans: Vec<ScanSpec>,
    /// The key a scan past its cap sets (True) in place of the keys it found.
    scan_overflow: String,
}

type MarkerTable = Vec<(String, Vec<(String, u32, Vec<String>)>)>;
type ScanSpec = (String, Vec<String>, Vec<String>, String, usize);

#[pymethods]
impl DecodeTables {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, decoded, any_keys, markers, tool_name, tagged_rank, tagged_plan, facts_plan,
                        facts_keys, result_keys, result_prefixes, langgraph_keys, run_id_key, decision, scans,
                        scan_overflow))]
    fn new(
        decoded: Py<PyAny>,
        any_keys: Vec<String>,
        markers: MarkerTable,
        tool_name: String,
        tagged_rank: u32,
        tagged_plan: Vec<String>,
        facts_plan: Vec<String>,
        facts_keys: Vec<String>,
        result_keys: Vec<String>,
        result_prefixes: Vec<String>,
        langgraph_keys: Vec<String>,
        run_id_key: String,
        decision: String,
        scans: Vec<ScanSpec>,
        scan_overflow: String,
    ) -> Self {
        let mut plans = Plans { any_keys, tool_name, tagged_rank, facts_keys, ..Plans::default() };
        plans.plans.push(tagged_plan);
        plans.tagged_plan = 0;
        plans.plans.push(facts_plan);
        plans.facts_plan = 1;
        for (key, values) in markers {
            let mut table = HashMap::new();
            for (value, rank, plan) in values {
                plans.plans.push(plan);
                table.insert(value, (rank, plans.plans.len() - 1));
            }
            plans.markers.push((key, table));
        }
        DecodeTables {
            plans,
            result_keys,
            result_prefixes,
            langgraph_keys,
            run_id_key,
            decision,
            decoded,
            scans,
            scan_overflow,
        }
    }
}

fn value_error(e: otlp::Error) -> PyErr {
    // Only for bytes validate() accepted: a bug, never a sender's fault.
    pyo3::exceptions::PyValueError::new_err(format!("native decode: {}", e.message()))
}

/// any_value(): the Python value of an AnyValue, arrays and maps below `MAX_VALUE_DEPTH`.
fn to_py<'py>(py: Python<'py>, value: &Value<'_>, depth: u32) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::None => py.None().into_bound(py),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Double(f) => PyFloat::new(py, *f).into_any(),
        Value::Bytes(b) => PyBytes::new(py, b).into_any(),
        Value::Index(i) => i.into_pyobject(py)?.into_any(),
        Value::Array(_) | Value::KvList(_) if depth >= MAX_VALUE_DEPTH => py.None().into_bound(py),
        Value::Array(parts) => {
            let list = PyList::empty(py);
            for element in otlp::elements(parts).map_err(value_error)? {
                list.append(to_py(py, &otlp::any_value(element).map_err(value_error)?, depth + 1)?)?;
            }
            list.into_any()
        }
        Value::KvList(parts) => {
            let dict = PyDict::new(py);
            for entry in otlp::elements(parts).map_err(value_error)? {
                let value = otlp::value_of(entry).map_err(value_error)?;
                dict.set_item(otlp::key_of(entry).map_err(value_error)?, to_py(py, &value, depth + 1)?)?;
            }
            dict.into_any()
        }
    })
}

/// decode.py's _values: the present keys' values, in the keys' order.
fn values_into<'py>(
    py: Python<'py>,
    dict: &Bound<'py, PyDict>,
    attrs: &[Attr<'_>],
    map: &KeyMap<'_>,
    keys: &[&str],
) -> PyResult<()> {
    for key in keys {
        if let Some(&i) = map.get(key) {
            let value = otlp::value_of(attrs[i].entry).map_err(value_error)?;
            dict.set_item(*key, to_py(py, &value, 0)?)?;
        }
    }
    Ok(())
}

/// scans.py's scanned(): the span's keys with one of `prefixes` and `suffix`, sorted; None
/// when more than `cap` match.
fn scanned<'m>(map: &KeyMap<'m>, prefixes: &[String], suffix: &str, cap: usize) -> Option<Vec<&'m str>> {
    let mut found = Vec::new();
    for &key in map.keys() {
        if key.ends_with(suffix) && prefixes.iter().any(|p| key.starts_with(p.as_str())) {
            if found.len() == cap {
                return None;
            }
            found.push(key);
        }
    }
    found.sort_unstable();
    Some(found)
}

struct Request<'a, 'py> {
    py: Python<'py>,
    tables: &'a DecodeTables,
    extra: Option<&'a str>,
    decisions: bool,
}

impl<'a, 'py> Request<'a, 'py> {
    /// The plan's values (plus the run attribute), with LangGraph's handoff keys when a result
    /// is a Command to the parent graph (decode.py's _is_command).
    fn values(&self, attrs: &[Attr<'_>], map: &KeyMap<'_>, plan: usize) -> PyResult<Bound<'py, PyDict>> {
        let mut keys: Vec<&str> = self.tables.plans.plans[plan].iter().map(String::as_str).collect();
        keys.extend(self.extra);
        let dict = PyDict::new(self.py);
        values_into(self.py, &dict, attrs, map, &keys)?;
        if self.is_command(attrs, map, &keys)? {
            let lg: Vec<&str> = self.tables.langgraph_keys.iter().map(String::as_str).collect();
            values_into(self.py, &dict, attrs, map, &lg)?;
        }
        for (marker, marker_values, prefixes, suffix, cap) in &self.tables.scans {
            // scans.marked(): the marker as the plan's values hold it, a string.
            let Some(value) = dict.get_item(marker.as_str())? else { continue };
            let Ok(value) = value.downcast::<PyString>() else { continue };
            let value = value.to_cow()?;
            if !marker_values.iter().any(|v| *v == *value) {
                continue;
            }
            match scanned(map, prefixes, suffix, *cap) {
                Some(found) => values_into(self.py, &dict, attrs, map, &found)?,
                None => dict.set_item(self.tables.scan_overflow.as_str(), true)?,
            }
        }
        Ok(dict)
    }

    fn is_command(&self, attrs: &[Attr<'_>], map: &KeyMap<'_>, read: &[&str]) -> PyResult<bool> {
        for key in &self.tables.result_keys {
            let Some(&i) = map.get(key.as_str()) else { continue };
            if !read.contains(&key.as_str()) {
                continue;
            }
            if let Value::Str(s) = otlp::value_of(attrs[i].entry).map_err(value_error)? {
                if self.tables.result_prefixes.iter().any(|p| s.starts_with(p.as_str())) {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// [(time, attributes)] of the span's events named loopguard.decision, None without any.
    fn decision_events(&self, events: &[&[u8]]) -> PyResult<Option<Bound<'py, PyList>>> {
        let mut out: Option<Bound<'py, PyList>> = None;
        for body in events {
            let (name, time, attrs) = otlp::read_event(body).map_err(value_error)?;
            if name != self.tables.decision {
                continue;
            }
            let dict = PyDict::new(self.py);
            for a in &attrs {
                let value = otlp::value_of(a.entry).map_err(value_error)?;
                dict.set_item(a.key, to_py(self.py, &value, 0)?)?;
            }
            let pair = PyTuple::new(self.py, [time.into_pyobject(self.py)?.into_any(), dict.into_any()])?;
            out.get_or_insert_with(|| PyList::empty(self.py)).append(pair)?;
        }
        Ok(out)
    }

    /// One valid span: its record appended to `spans`, and to `pending` when Python has more to
    /// read of it: (record, name, status, values or None, decision events or None, run values).
    fn span<'b>(
        &self,
        view: &SpanView<'b>,
        local: &mut KeyMap<'b>,
        where_: &Bound<'py, PyTuple>,
        spans: &Bound<'py, PyList>,
        pending: &Bound<'py, PyList>,
    ) -> PyResult<()> {
        let py = self.py;
        let attrs = &view.attrs;
        otlp::index_attrs(attrs, local);  // one map for the request, rebuilt per span
        let trace = PyBytes::new(py, view.trace_id);
        let span_id = PyBytes::new(py, view.span_id);
        let parent = PyBytes::new(py, view.parent);
        let name = PyString::new(py, view.name);
        let start = view.start.into_pyobject(py)?;
        let end = view.end.into_pyobject(py)?;
        let content = PyTuple::new(
            py,
            [
                start.clone().into_any(),
                end.clone().into_any(),
                parent.clone().into_any(),
                name.clone().into_any(),
                view.status.into_pyobject(py)?.into_any(),
                local.len().into_pyobject(py)?.into_any(),
            ],
        )?
        .hash()?;
        let key = PyBytes::new(py, &[view.trace_id, view.span_id].concat());
        let kwargs = PyDict::new(py);
        kwargs.set_item(intern!(py, "where"), where_)?;
        kwargs.set_item(intern!(py, "key"), key)?;
        kwargs.set_item(intern!(py, "content"), content)?;
        kwargs.set_item(intern!(py, "trace_id"), trace)?;
        kwargs.set_item(intern!(py, "span_id"), span_id)?;
        kwargs.set_item(intern!(py, "parent"), parent)?;
        kwargs.set_item(intern!(py, "start"), start)?;
        kwargs.set_item(intern!(py, "end"), end)?;
        let record = self.tables.decoded.bind(py).call((), Some(&kwargs))?;
        spans.append(&record)?;
        let plan = self.tables.plans.plan_of(attrs, local).map_err(value_error)?;
        let values = match plan {
            Some(p) => Some(self.values(attrs, local, p)?),
            None => None,
        };
        let events = if self.decisions && !view.events.is_empty() { self.decision_events(&view.events)? } else { None };
        if values.is_none() && events.is_none() {
            return Ok(());
        }
        let run_values = PyDict::new(py);
        if events.is_some() {
            let mut keys = vec![self.tables.run_id_key.as_str()];
            keys.extend(self.extra);
            values_into(py, &run_values, attrs, local, &keys)?;
        }
        let entry = PyTuple::new(
            py,
            [
                record,
                name.into_any(),
                view.status.into_pyobject(py)?.into_any(),
                values.map_or_else(|| py.None().into_bound(py), Bound::into_any),
                events.map_or_else(|| py.None().into_bound(py), Bound::into_any),
                run_values.into_any(),
            ],
        )?;
        pending.append(entry)
    }
}

fn valid_ids(view: &SpanView<'_>) -> bool {
    view.trace_id.len() == 16
        && view.span_id.len() == 8
        && (view.parent.is_empty() || view.parent.len() == 8)
        && view.trace_id != [0u8; 16]
        && view.span_id != [0u8; 8]
}

/// decode.py's decode: an error's status text (str), the span count when over `max_spans`
/// (int), else (records, rejected as (where, name, trace id, span id, parent), pending).
#[pyfunction]
#[pyo3(signature = (data, tables, run_id_attribute, max_spans))]
fn decode_request<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyBytes>,
    tables: &DecodeTables,
    run_id_attribute: Option<&str>,
    max_spans: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let bytes = data.as_bytes();
    // The whole request is checked before anything is made, without the GIL: a large request
    // decoded in a worker thread leaves the event loop its turn.
    let count = match py.allow_threads(|| otlp::validate(bytes)) {
        Ok(count) => count,
        Err(e) => return Ok(PyString::new(py, e.message()).into_any()),
    };
    if max_spans.is_some_and(|m| count > m) {
        return Ok(count.into_pyobject(py)?.into_any());
    }
    let request = Request {
        py,
        tables,
        extra: run_id_attribute.filter(|a| !a.is_empty()),
        decisions: memchr::memmem::find(bytes, tables.decision.as_bytes()).is_some(),
    };
    let mut bodies = Vec::with_capacity(count);
    otlp::spans(bytes, |where_, body| {
        bodies.push((where_, body));
        Ok(())
    })
    .map_err(value_error)?;
    let (spans, rejected, pending) = (PyList::empty(py), PyList::empty(py), PyList::empty(py));
    let mut view = SpanView::default();
    let mut map = KeyMap::default();
    for ((r, s, i), body) in bodies {
        otlp::read_span(body, &mut view).map_err(value_error)?;
        let where_ = PyTuple::new(py, [r, s, i])?;
        if !valid_ids(&view) {
            let why = (where_, view.name, PyBytes::new(py, view.trace_id), PyBytes::new(py, view.span_id),
                       PyBytes::new(py, view.parent));
            rejected.append(why)?;
            continue;
        }
        request.span(&view, &mut map, &where_, &spans, &pending)?;
    }
    Ok(PyTuple::new(py, [spans.into_any(), rejected.into_any(), pending.into_any()])?.into_any())
}

/// The reader's schema, (message, field, "str" | "bytes" | "message:<name>"), for the test
/// that holds it to protobuf's descriptors.
#[pyfunction]
fn otlp_schema() -> Vec<(&'static str, u32, String)> {
    otlp::SCHEMA
        .iter()
        .map(|(msg, field, kind)| {
            let kind = match kind {
                otlp::Kind::Str => "str".to_string(),
                otlp::Kind::Bytes => "bytes".to_string(),
                otlp::Kind::Message(inner) => format!("message:{}", inner.name()),
            };
            (msg.name(), *field, kind)
        })
        .collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<DecodeTables>()?;
    m.add_function(wrap_pyfunction!(otlp_schema, m)?)?;
    m.add_function(wrap_pyfunction!(decode_request, m)?)?;
    Ok(())
}
