//! Property tests of the OTLP request reader (src/otlp.rs) on the Rust side alone; the
//! differential tests against the Python reference are tests/native/test_decode_differential.py.
//! The committed corpus (corpus-otlp/) carries the reference's answer for each file
//! (expected.tsv, written by the Python decode): the reader must give the same.
//!
//!   cargo test --release --no-default-features --test otlp_props   (PROPTEST_CASES=N for a longer run)

use otel_loopguard_native::otlp::{self, Error, KeyMap, SpanView, Value};
use proptest::prelude::*;
use std::fs;
use std::path::Path;

fn corpus() -> Vec<(String, Vec<u8>, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus-otlp");
    let expected = fs::read_to_string(dir.join("expected.tsv")).expect("corpus-otlp/expected.tsv is committed");
    expected
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|line| {
            let (name, answer) = line.split_once('\t').expect("file<TAB>answer");
            (name.to_string(), fs::read(dir.join(name)).unwrap(), answer.to_string())
        })
        .collect()
}

/// What the reader answers for a request, in expected.tsv's words; a request it accepts is
/// read whole too (every span, key, value and event), which must never fail.
fn answer(data: &[u8]) -> String {
    match otlp::validate(data) {
        Err(e) => e.message().to_string(),
        Ok(count) => {
            assert_eq!(read_all(data), count, "validate() and spans() count alike");
            format!("ok {count}")
        }
    }
}

fn read_value(value: &Value<'_>, depth: u32) {
    if depth > 40 {
        return;
    }
    match value {
        Value::Array(parts) => {
            for element in otlp::elements(parts).expect("elements of a valid array") {
                read_value(&otlp::any_value(element).expect("a valid element"), depth + 1);
            }
        }
        Value::KvList(parts) => {
            for entry in otlp::elements(parts).expect("entries of a valid map") {
                otlp::key_of(entry).expect("a valid key");
                read_value(&otlp::value_of(entry).expect("a valid value"), depth + 1);
            }
        }
        _ => {}
    }
}

fn read_all(data: &[u8]) -> usize {
    let mut n = 0;
    let mut view = SpanView::default();
    let mut map = KeyMap::default();
    otlp::spans(data, |_, body| {
        otlp::read_span(body, &mut view)?;
        otlp::index_attrs(&view.attrs, &mut map);
        assert!(map.len() <= view.attrs.len());
        for a in &view.attrs {
            read_value(&otlp::value_of(a.entry)?, 0);
        }
        for event in &view.events {
            let (_, _, attrs) = otlp::read_event(event)?;
            for a in &attrs {
                read_value(&otlp::value_of(a.entry)?, 0);
            }
        }
        n += 1;
        Ok(())
    })
    .expect("a request validate() accepts is read whole");
    n
}

#[test]
fn the_corpus_answers_as_the_python_reference() {
    let cases = corpus();
    assert!(cases.len() >= 50, "the corpus holds {} files", cases.len());
    for (name, data, expected) in &cases {
        assert_eq!(&answer(data), expected, "{name}");
    }
}

// -- a small encoder for generated requests ------------------------------------------------

fn varint(mut n: u64, out: &mut Vec<u8>) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn ld(field: u32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(u64::from(field << 3 | 2), &mut out);
    varint(body.len() as u64, &mut out);
    out.extend_from_slice(body);
    out
}

#[derive(Debug, Clone)]
struct GenSpan {
    trace: Vec<u8>,
    span: Vec<u8>,
    name: String,
    start: u64,
    end: u64,
    attrs: Vec<(String, String)>,
}

fn gen_span() -> impl Strategy<Value = GenSpan> {
    (
        prop::collection::vec(any::<u8>(), 0..18),
        prop::collection::vec(any::<u8>(), 0..10),
        "[a-z _.]{0,12}",
        any::<u64>(),
        any::<u64>(),
        prop::collection::vec(("[a-z._]{0,10}", "\\PC{0,8}"), 0..8),
    )
        .prop_map(|(trace, span, name, start, end, attrs)| GenSpan { trace, span, name, start, end, attrs })
}

fn encode(spans: &[GenSpan]) -> Vec<u8> {
    let mut scope = Vec::new();
    for s in spans {
        let mut body = [ld(1, &s.trace), ld(2, &s.span), ld(5, s.name.as_bytes())].concat();
        body.push(7 << 3 | 1);
        body.extend(s.start.to_le_bytes());
        body.push(8 << 3 | 1);
        body.extend(s.end.to_le_bytes());
        for (k, v) in &s.attrs {
            body.extend(ld(9, &[ld(1, k.as_bytes()), ld(2, &ld(1, v.as_bytes()))].concat()));
        }
        scope.extend(ld(2, &body));
    }
    ld(1, &ld(2, &scope))
}

/// A few byte edits of the kinds that break framing or content (as tests/reliability/fuzzing.py).
fn mutated(mut data: Vec<u8>, edits: &[(u8, usize, u8)]) -> Vec<u8> {
    for &(kind, at, byte) in edits {
        let at = if data.is_empty() { 0 } else { at % (data.len() + 1) };
        match kind % 6 {
            0 if at < data.len() => data[at] ^= 1 << (byte % 8),
            1 => data.insert(at, byte),
            2 if at < data.len() => {
                data.remove(at);
            }
            3 if at < data.len() => data[at] = [0x00, 0x01, 0x7f, 0x80, 0xff][byte as usize % 5],
            4 => data.truncate(at),
            _ if at < data.len() => data[at] = byte,
            _ => {}
        }
    }
    data
}

proptest! {
    #[test]
    fn generated_requests_read_back(spans in prop::collection::vec(gen_span(), 0..6)) {
        let data = encode(&spans);
        prop_assert_eq!(otlp::validate(&data), Ok(spans.len()));
        let mut view = SpanView::default();
        let mut i = 0;
        otlp::spans(&data, |where_, body| {
            otlp::read_span(body, &mut view)?;
            let s = &spans[i];
            assert_eq!(where_, (0, 0, i));
            assert_eq!((view.trace_id, view.span_id, view.name), (&s.trace[..], &s.span[..], s.name.as_str()));
            assert_eq!((view.start, view.end), (s.start, s.end));
            for (a, (k, v)) in view.attrs.iter().zip(&s.attrs) {
                assert_eq!(a.key, k);
                assert_eq!(otlp::value_of(a.entry)?, Value::Str(v));
            }
            i += 1;
            Ok(())
        }).unwrap();
    }

    #[test]
    fn any_bytes_are_answered_without_a_panic(data in prop::collection::vec(any::<u8>(), 0..256)) {
        answer(&data);
    }

    #[test]
    fn mutated_corpus_files_are_answered_without_a_panic(
        pick in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 1..4),
    ) {
        let cases = corpus_bytes();
        let data = mutated(pick.get(cases).clone(), &edits);
        answer(&data);
    }

    #[test]
    fn nesting_stops_at_the_reference_depth(n in 0usize..60) {
        let mut value = Vec::new();
        for _ in 0..n {
            value = ld(5, &ld(1, &value));
        }
        let span = [ld(1, &[1; 16]), ld(2, &[2; 8]), ld(9, &[ld(1, b"k"), ld(2, &value)].concat())].concat();
        let got = otlp::validate(&ld(1, &ld(2, &ld(2, &span))));
        // the request is level 1, the AnyValue 6, each array two more: protobuf's Python runtime stops at 102
        prop_assert_eq!(got, if 6 + 2 * n > 101 { Err(Error::MaxDepth) } else { Ok(1) });
    }
}

fn corpus_bytes() -> &'static Vec<Vec<u8>> {
    static CORPUS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(|| corpus().into_iter().map(|(_, data, _)| data).collect())
}
