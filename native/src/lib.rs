//! otel_loopguard_native: the canonical form and keyed digest of JSON payloads, in Rust.
//! The Python module `otel_loopguard/canon/canonical.py` is the reference; this one must
//! give the same bytes, flags and digests (tests/native/). Pure logic is in `canon` and
//! `digest` (safe Rust); this file is only the PyO3 glue. `otlp` reads an OTLP trace request
//! for the receiver (the reference: `otel_loopguard/receiver/ingest/decode.py`); its glue is `decode`.

pub mod canon;
pub mod digest;
pub mod otlp;

#[cfg(feature = "python")]
mod decode;

#[cfg(feature = "python")]
mod python {
    use super::canon::{self, Limits};
    use super::digest;
    use pyo3::prelude::*;
    use pyo3::types::{PyBytes, PyString};

    /// Bumped whenever the Python-facing signatures change: native.py checks it.
    const ABI: u32 = 3;

    /// Keys to drop at every depth, converted once per set.
    #[pyclass(frozen, module = "otel_loopguard_native")]
    struct Drops {
        keys: Vec<Vec<u8>>,
    }

    #[pymethods]
    impl Drops {
        #[new]
        fn new(keys: Vec<String>) -> Self {
            Drops { keys: keys.into_iter().map(String::into_bytes).collect() }
        }
    }

    /// The UTF-8 of text input: a str (without lone surrogates) or bytes that are UTF-8.
    /// Anything else is None: the caller takes the Python path.
    fn text_of<'a>(value: &'a Bound<'_, PyAny>) -> Option<&'a [u8]> {
        if let Ok(s) = value.downcast::<PyString>() {
            return s.to_str().ok().map(str::as_bytes);
        }
        let b = value.downcast::<PyBytes>().ok()?;
        let bytes = b.as_bytes();
        std::str::from_utf8(bytes).ok().map(str::as_bytes)
    }

    fn limits(max_bytes: usize, max_depth: usize, max_int_digits: usize) -> Limits {
        Limits { max_bytes, max_depth, max_int_digits }
    }

    /// (is JSON, canonical text as UTF-8, flag bits) of text, or None for other input.
    #[pyfunction]
    fn canonical<'py>(
        py: Python<'py>,
        value: &Bound<'py, PyAny>,
        drops: &Drops,
        max_bytes: usize,
        max_depth: usize,
        max_int_digits: usize,
    ) -> Option<(bool, Bound<'py, PyBytes>, u32)> {
        let src = text_of(value)?;
        let c = canon::canonical(src, &drops.keys, &limits(max_bytes, max_depth, max_int_digits));
        Some((c.json, PyBytes::new(py, &c.text), c.flags))
    }

    /// A digest key. Holds the secret's prepared HMAC state only; shows nothing of it.
    #[pyclass(frozen, module = "otel_loopguard_native")]
    struct Key {
        state: digest::State,
    }

    #[pymethods]
    impl Key {
        #[new]
        fn new(secret: &[u8]) -> Self {
            Key { state: digest::keyed(secret) }
        }

        /// The state after `head` (the message's fixed start), for many digests.
        fn prefixed(&self, head: &[u8]) -> Prefix {
            use hmac::Mac;
            let mut state = self.state.clone();
            state.update(head);
            Prefix { state }
        }

        fn __repr__(&self) -> &'static str {
            "otel_loopguard_native.Key(<secret>)"
        }
    }

    #[pyclass(frozen, module = "otel_loopguard_native")]
    struct Prefix {
        state: digest::State,
    }

    #[pymethods]
    impl Prefix {
        /// digest(head + rest)
        fn digest(&self, rest: &[u8]) -> String {
            digest::hex_digest(&self.state, &[rest])
        }

        /// digest(head + identity NUL form NUL text): fingerprinter._digest's message.
        fn digest_form(&self, identity: &[u8], json: bool, text: &[u8]) -> String {
            let form: &[u8] = if json { b"\0json\0" } else { b"\0text\0" };
            digest::hex_digest(&self.state, &[identity, form, text])
        }

        /// (digest, flag bits) of text's canonical form in one step, or None for other input.
        #[allow(clippy::too_many_arguments)]
        fn digest_text(
            &self,
            value: &Bound<'_, PyAny>,
            identity: &[u8],
            drops: &Drops,
            max_bytes: usize,
            max_depth: usize,
            max_int_digits: usize,
        ) -> Option<(String, u32)> {
            let src = text_of(value)?;
            let c = canon::canonical(src, &drops.keys, &limits(max_bytes, max_depth, max_int_digits));
            Some((self.digest_form(identity, c.json, &c.text), c.flags))
        }

        fn __repr__(&self) -> &'static str {
            "otel_loopguard_native.Prefix(<state>)"
        }
    }

    #[pymodule]
    fn otel_loopguard_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add("ABI", ABI)?;
        m.add("OPAQUE", canon::OPAQUE)?;
        m.add("DOUBLE_ENCODED", canon::DOUBLE_ENCODED)?;
        m.add("DUPLICATE_KEYS", canon::DUPLICATE_KEYS)?;
        m.add("NON_FINITE", canon::NON_FINITE)?;
        m.add("TOO_DEEP", canon::TOO_DEEP)?;
        m.add("TOO_LARGE", canon::TOO_LARGE)?;
        m.add("PROSE", canon::PROSE)?;
        m.add("MAX_TEXT_DEPTH", canon::MAX_TEXT_DEPTH)?;
        m.add_class::<Drops>()?;
        m.add_class::<Key>()?;
        m.add_class::<Prefix>()?;
        m.add_function(wrap_pyfunction!(canonical, m)?)?;
        super::decode::register(m)?;
        Ok(())
    }
}
