//! Property tests of the canonical form on the Rust side alone (the differential tests against
//! the Python reference are in tests/native/): it never panics, whatever the text; its output is
//! a fixed point; floats round-trip; and the committed corpus (corpus/) stays settled.
//!
//!   cargo test --release --no-default-features          (PROPTEST_CASES=N for a longer run)

use otel_loopguard_native::canon::{self, canonical, Limits};
use proptest::prelude::*;
use std::fs;
use std::path::Path;

const LIM: Limits = Limits { max_bytes: 256 * 1024, max_depth: 64, max_int_digits: 4300 };

/// Canonical JSON text is its own canonical form (without the flags of what was undone).
fn assert_fixed_point(src: &[u8]) {
    let first = canonical(src, &[], &LIM);
    if !first.json {
        assert_eq!(first.text, src, "opaque text is kept as it is");
        return;
    }
    let again = canonical(&first.text, &[], &LIM);
    assert!(again.json, "canonical text parses: {:?}", String::from_utf8_lossy(&first.text));
    assert_eq!(again.text, first.text);
    // NaN under a repeated key is flagged though the last value wins: flags may only go.
    let kept = canon::NON_FINITE | canon::TOO_DEEP;
    assert_eq!(again.flags & kept & !first.flags, 0);
    assert_eq!(again.flags & canon::TOO_DEEP, first.flags & canon::TOO_DEEP);
}

#[test]
fn the_corpus_is_settled() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut n = 0;
    for entry in fs::read_dir(dir).expect("native/corpus is committed") {
        let src = fs::read(entry.unwrap().path()).unwrap();
        assert_fixed_point(&src);
        for depth in [0, 1, 2, 64] {
            let lim = Limits { max_depth: depth, ..LIM };
            canonical(&src, &[b"a".to_vec(), b"timestamp".to_vec()], &lim);
        }
        n += 1;
    }
    assert!(n >= 50, "the corpus holds {n} files");
}

fn json_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("NaN".to_string()),
        Just("-Infinity".to_string()),
        any::<i64>().prop_map(|i| i.to_string()),
        "-?(0|[1-9][0-9]{0,30})(\\.[0-9]{1,20})?([eE][-+]?[0-9]{1,3})?",
        any::<f64>().prop_map(|f| format!("{f:e}")),
        "\"([a-zé😀 /]|\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4}|\\\\ud83d\\\\ude00)*\"",
    ];
    leaf.prop_recursive(6, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(|v| format!("[{}]", v.join(" , "))),
            prop::collection::vec(("[a-e]{1,2}", inner), 0..6).prop_map(|kv| {
                let items: Vec<String> = kv.into_iter().map(|(k, v)| format!("\"{k}\" :{v}")).collect();
                format!("{{ {} }}", items.join(","))
            }),
        ]
    })
}

/// 2,000 cases a property, or PROPTEST_CASES (the long run quoted in docs/fingerprints.md).
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn generated_json_is_a_fixed_point(text in json_value()) {
        assert_fixed_point(text.as_bytes());
    }

    #[test]
    fn generated_json_parses(text in json_value()) {
        prop_assert!(canonical(text.as_bytes(), &[], &LIM).json);
    }

    #[test]
    fn odd_text_never_panics(text in "[\\[\\]{}\",:\\\\/ \\t\\n0-9eE.+\\-uNIaltrufsé]{0,60}") {
        assert_fixed_point(text.as_bytes());
    }

    #[test]
    fn any_utf8_never_panics(text in any::<String>(), depth in 0usize..4, max_bytes in 0usize..64) {
        canonical(text.as_bytes(), &[b"a".to_vec()], &Limits { max_bytes, max_depth: depth, max_int_digits: 10 });
    }

    #[test]
    fn floats_round_trip(f in any::<f64>().prop_filter("finite", |f| f.is_finite())) {
        let mut out = Vec::new();
        canon::write_float(f, &mut out);
        let text = String::from_utf8(out).unwrap();
        prop_assert_eq!(text.parse::<f64>().unwrap().to_bits(), f.to_bits());
        prop_assert!(text.contains('.') || text.contains('e'), "{}", text);
    }

    #[test]
    fn nesting_check_is_exact_for_valid_json(depth in 190usize..210) {
        let text = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        prop_assert_eq!(canon::nesting_over(text.as_bytes(), canon::MAX_TEXT_DEPTH), depth > canon::MAX_TEXT_DEPTH);
    }
}
