//! Canonical text of JSON payloads, byte for byte what `otel_loopguard/canon/canonical.py`
//! gives (`parse` then `serialise`) for text input. The Python module is the reference: its rules
//! are the standard library's `json` reading (strict, hooks for duplicate keys and NaN) and
//! writing (sorted keys, compact, no ASCII escaping, `float.__repr__`). Everything here is safe
//! Rust; the PyO3 glue lives in lib.rs.
//!
//! Strings are kept as "generalised UTF-8" bytes: a `\ud800` escape that pairs with nothing
//! becomes the three bytes Python's `encode("utf-8", "surrogatepass")` writes for it, so byte
//! order stays code-point order (key sorting) and the output is what the Python path digests.
#![deny(unsafe_code)]

use std::borrow::Cow;
use std::fmt::Write as _;

pub const OPAQUE: u32 = 1;
pub const DOUBLE_ENCODED: u32 = 2;
pub const DUPLICATE_KEYS: u32 = 4;
pub const NON_FINITE: u32 = 8;
pub const TOO_DEEP: u32 = 16;
pub const TOO_LARGE: u32 = 32;
/// Opaque text settled by its first character (canonical.PROSE, which the memo may keep).
pub const PROSE: u32 = 64;

/// JSON text nested deeper than this is opaque text (canonical.MAX_TEXT_DEPTH).
pub const MAX_TEXT_DEPTH: usize = 200;
/// A hard stop for the recursive parser, never reached by text that passed the nesting check.
const PARSER_STACK_GUARD: usize = 1000;

#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_bytes: usize,
    pub max_depth: usize,
    /// Python's `sys.get_int_max_str_digits()`: an integer with more digits fails to parse
    /// (the whole text is then opaque). 0 means no limit.
    pub max_int_digits: usize,
}

#[derive(Debug, PartialEq, Eq)]
pub struct Canon {
    pub json: bool,
    pub text: Vec<u8>,
    pub flags: u32,
}

/// A parsed value; text without escapes is borrowed from the source, not copied.
#[derive(Debug, Clone)]
enum Value<'a> {
    Null,
    Bool(bool),
    /// Decimal digits as Python's `str(int)` writes them ("-0" already made "0").
    Int(&'a [u8]),
    Float(f64),
    Str(Cow<'a, [u8]>),
    Arr(Vec<Value<'a>>),
    /// Sorted by key, duplicates resolved (last value wins).
    Obj(Vec<(Cow<'a, [u8]>, Value<'a>)>),
}

/// `parse` then `serialise` of text (UTF-8), with `drop` removed at every depth.
pub fn canonical(src: &[u8], drop: &[Vec<u8>], lim: &Limits) -> Canon {
    if src.len() > lim.max_bytes {
        return opaque(src, OPAQUE | TOO_LARGE);
    }
    if nesting_over(src, MAX_TEXT_DEPTH) {
        return opaque(src, OPAQUE | TOO_DEEP);
    }
    match skip_ws(src, 0).and_then(|i| src.get(i)) {
        Some(c) if b"{[\"-0123456789tfnNI".contains(c) => {}
        _ => return opaque(src, OPAQUE | PROSE),
    }
    let mut flags = 0;
    let value = match parse_text(src, lim, &mut flags) {
        Some(v) => v,
        None => return opaque(src, OPAQUE),
    };
    if let Value::Str(s) = &value {
        if starts_structure(s) && !nesting_over(s, MAX_TEXT_DEPTH) {
            let mut inner = 0;
            if let Some(v) = parse_text(s, lim, &mut inner) {
                return serialise(&v, src, flags | inner | DOUBLE_ENCODED, drop, lim.max_depth);
            }
        }
    }
    serialise(&value, src, flags, drop, lim.max_depth)
}

fn opaque(src: &[u8], flags: u32) -> Canon {
    Canon { json: false, text: src.to_vec(), flags }
}

/// `s.lstrip()[:1] in ("{", "[")`. Python strips any Unicode space there, but only JSON
/// space can precede text that then parses, so stripping JSON space decides alike.
fn starts_structure(s: &[u8]) -> bool {
    matches!(skip_ws(s, 0).and_then(|i| s.get(i)), Some(b'{') | Some(b'['))
}

fn skip_ws(s: &[u8], mut i: usize) -> Option<usize> {
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    Some(i)
}

/// canonical._nesting_over: brackets outside strings, strings as the regex
/// `"(?:[^"\\]|\\.)*"` reads them (`.` is any character but a newline; a quote that opens
/// no complete string is skipped like any other character).
pub fn nesting_over(s: &[u8], limit: usize) -> bool {
    let brackets = s.iter().filter(|&&c| c == b'[' || c == b'{').count();
    if brackets <= limit {
        return false;
    }
    let mut depth: i64 = 0;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'"' => {
                if let Some(end) = regex_string_end(s, i + 1) {
                    i = end;
                    continue;
                }
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > limit as i64 {
                    return true;
                }
            }
            b']' | b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    false
}

fn regex_string_end(s: &[u8], mut j: usize) -> Option<usize> {
    while j < s.len() {
        match s[j] {
            b'"' => return Some(j + 1),
            b'\\' => {
                if j + 1 < s.len() && s[j + 1] != b'\n' {
                    j += 2;
                } else {
                    return None;
                }
            }
            _ => j += 1,
        }
    }
    None
}

fn parse_text<'a>(src: &'a [u8], lim: &Limits, flags: &mut u32) -> Option<Value<'a>> {
    let mut p = Parser { s: src, i: 0, lim: *lim, flags: 0, depth: 0 };
    let start = skip_ws(src, 0)?;
    p.i = start;
    let v = p.value()?;
    let end = skip_ws(src, p.i)?;
    if end != src.len() {
        return None; // "Extra data"
    }
    *flags |= p.flags;
    Some(v)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    lim: Limits,
    flags: u32,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            true
        } else {
            false
        }
    }

    /// json's C `scan_once`: one value at the current position (no leading space).
    fn value(&mut self) -> Option<Value<'a>> {
        match self.peek()? {
            b'"' => {
                self.i += 1;
                self.string().map(Value::Str)
            }
            b'{' => self.nested(Self::object),
            b'[' => self.nested(Self::array),
            b'n' if self.literal(b"null") => Some(Value::Null),
            b't' if self.literal(b"true") => Some(Value::Bool(true)),
            b'f' if self.literal(b"false") => Some(Value::Bool(false)),
            b'N' if self.literal(b"NaN") => self.constant(f64::NAN),
            b'I' if self.literal(b"Infinity") => self.constant(f64::INFINITY),
            b'-' if self.literal(b"-Infinity") => self.constant(f64::NEG_INFINITY),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn constant(&mut self, f: f64) -> Option<Value<'a>> {
        self.flags |= NON_FINITE; // canonical._constant
        Some(Value::Float(f))
    }

    fn nested(&mut self, f: fn(&mut Self) -> Option<Value<'a>>) -> Option<Value<'a>> {
        self.depth += 1;
        if self.depth > PARSER_STACK_GUARD {
            return None;
        }
        self.i += 1;
        let v = f(self);
        self.depth -= 1;
        v
    }

    fn object(&mut self) -> Option<Value<'a>> {
        let mut items: Vec<(Cow<'a, [u8]>, Value<'a>)> = Vec::new();
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(Value::Obj(items));
        }
        loop {
            if self.peek()? != b'"' {
                return None;
            }
            self.i += 1;
            let key = self.string()?;
            self.ws();
            if self.peek()? != b':' {
                return None;
            }
            self.i += 1;
            self.ws();
            let v = self.value()?;
            items.push((key, v));
            self.ws();
            match self.peek()? {
                b'}' => {
                    self.i += 1;
                    break;
                }
                b',' => {
                    self.i += 1;
                    self.ws();
                }
                _ => return None,
            }
        }
        Some(Value::Obj(self.sorted_unique(items)))
    }

    /// dict(pairs) then sorted keys: the last value of a repeated key wins (flagged).
    #[allow(clippy::type_complexity)]
    fn sorted_unique(&mut self, mut items: Vec<(Cow<'a, [u8]>, Value<'a>)>) -> Vec<(Cow<'a, [u8]>, Value<'a>)> {
        if items.len() < 2 {
            return items;
        }
        // A stable sort keeps repeats in text order: the last of each run is the one kept.
        items.sort_by(|a, b| a.0.cmp(&b.0));
        let n = items.len();
        let mut out: Vec<(Cow<'a, [u8]>, Value<'a>)> = Vec::with_capacity(n);
        for item in items {
            if let Some(last) = out.last_mut() {
                if last.0 == item.0 {
                    self.flags |= DUPLICATE_KEYS;
                    *last = item;
                    continue;
                }
            }
            out.push(item);
        }
        out
    }

    fn array(&mut self) -> Option<Value<'a>> {
        let mut items = Vec::new();
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(Value::Arr(items));
        }
        loop {
            items.push(self.value()?);
            self.ws();
            match self.peek()? {
                b']' => {
                    self.i += 1;
                    break;
                }
                b',' => {
                    self.i += 1;
                    self.ws();
                }
                _ => return None,
            }
        }
        Some(Value::Arr(items))
    }

    /// json's C scanstring, strict: after the opening quote, up to and past the closing one.
    fn string(&mut self) -> Option<Cow<'a, [u8]>> {
        let s = self.s;
        let first = self.i;
        let mut out = Vec::new();
        loop {
            let start = self.i;
            while self.i < s.len() && s[self.i] != b'"' && s[self.i] != b'\\' && s[self.i] >= 0x20 {
                self.i += 1;
            }
            if start == first && self.peek() == Some(b'"') {
                self.i += 1; // no escape in it: borrowed as it is
                return Some(Cow::Borrowed(&s[first..self.i - 1]));
            }
            out.extend_from_slice(&s[start..self.i]);
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(Cow::Owned(out));
                }
                b'\\' => {
                    self.i += 1;
                    self.escape(&mut out)?;
                }
                _ => return None, // "Invalid control character"
            }
        }
    }

    fn escape(&mut self, out: &mut Vec<u8>) -> Option<()> {
        let c = self.peek()?;
        self.i += 1;
        let simple = match c {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let mut cp = self.hex4()?;
                if (0xd800..=0xdbff).contains(&cp) && self.s[self.i..].starts_with(b"\\u") {
                    let save = self.i;
                    self.i += 2;
                    let low = self.hex4()?; // bad hex here is an error in Python too
                    if (0xdc00..=0xdfff).contains(&low) {
                        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
                    } else {
                        self.i = save;
                    }
                }
                push_code_point(out, cp);
                return Some(());
            }
            _ => return None, // "Invalid \\escape"
        };
        out.push(simple);
        Some(())
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.s.get(self.i..self.i + 4)?;
        let mut v = 0u32;
        for &d in digits {
            v = v * 16 + (d as char).to_digit(16)?;
        }
        self.i += 4;
        Some(v)
    }

    /// json's C `_match_number_unicode`, then int() or float() of the matched text.
    fn number(&mut self) -> Option<Value<'a>> {
        let s = self.s;
        let start = self.i;
        let mut i = start;
        if s.get(i) == Some(&b'-') {
            i += 1;
        }
        match s.get(i)? {
            b'1'..=b'9' => {
                while matches!(s.get(i), Some(b'0'..=b'9')) {
                    i += 1;
                }
            }
            b'0' => i += 1,
            _ => return None,
        }
        let mut is_float = false;
        if s.get(i) == Some(&b'.') && matches!(s.get(i + 1), Some(b'0'..=b'9')) {
            is_float = true;
            i += 2;
            while matches!(s.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        if matches!(s.get(i), Some(b'e' | b'E')) {
            let e_start = i;
            i += 1;
            if matches!(s.get(i), Some(b'-' | b'+')) {
                i += 1;
            }
            let digits_from = i;
            while matches!(s.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
            if i > digits_from {
                is_float = true;
            } else {
                i = e_start; // "1e" is the number 1 followed by other text
            }
        }
        self.i = i;
        let text = &s[start..i];
        if is_float {
            // Correctly rounded, as PyFloat_FromString; overflow gives an infinity.
            let t = std::str::from_utf8(text).ok()?;
            return t.parse::<f64>().ok().map(Value::Float);
        }
        let negative = text[0] == b'-';
        let digits = if negative { &text[1..] } else { text };
        if self.lim.max_int_digits > 0 && digits.len() > self.lim.max_int_digits {
            return None; // int(): "Exceeds the limit for integer string conversion"
        }
        if digits == b"0" {
            return Some(Value::Int(b"0")); // int("-0") == 0
        }
        Some(Value::Int(text))
    }
}

/// A code point as UTF-8, lone surrogates as `surrogatepass` writes them.
fn push_code_point(out: &mut Vec<u8>, cp: u32) {
    if let Some(c) = char::from_u32(cp) {
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    } else {
        out.push(0xe0 | (cp >> 12) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3f) as u8);
        out.push(0x80 | (cp & 0x3f) as u8);
    }
}

/// canonical.serialise of a value parsed from `source`: the plain encoder when nothing may
/// need dropping and the text is shallow (and the output shows no NaN/Infinity), otherwise
/// the walk, which drops keys, flags non-finite numbers and containers past `max_depth`.
fn serialise(v: &Value, source: &[u8], mut flags: u32, drop: &[Vec<u8>], max_depth: usize) -> Canon {
    let brackets = source.iter().filter(|&&c| c == b'[' || c == b'{').count();
    let plain = !(!drop.is_empty() && may_drop(source, drop)) && brackets <= max_depth;
    let mut out = Vec::with_capacity(source.len());
    if plain {
        write_value(v, &[], &mut out);
        if !contains(&out, b"Infinity") && !contains(&out, b"NaN") {
            return Canon { json: true, text: out, flags };
        }
        out.clear();
    }
    let mut walk = Walk { drop, max_depth, flags: 0 };
    walk.visit(v, 0);
    flags |= walk.flags;
    write_value(v, drop, &mut out);
    Canon { json: true, text: out, flags }
}

struct Walk<'a> {
    drop: &'a [Vec<u8>],
    max_depth: usize,
    flags: u32,
}

impl Walk<'_> {
    /// canonical._walk's flags: non-finite floats, and a container at `max_depth` or below.
    fn visit(&mut self, v: &Value, depth: usize) {
        match v {
            Value::Float(f) if !f.is_finite() => self.flags |= NON_FINITE,
            Value::Arr(items) => {
                self.container(depth);
                items.iter().for_each(|x| self.visit(x, depth + 1));
            }
            Value::Obj(items) => {
                self.container(depth);
                for (k, x) in items {
                    if !self.drop.iter().any(|d| d[..] == k[..]) {
                        self.visit(x, depth + 1);
                    }
                }
            }
            _ => {}
        }
    }

    fn container(&mut self, depth: usize) {
        if depth >= self.max_depth {
            self.flags |= TOO_DEEP; // written alike by the iterative writer
        }
    }
}

/// canonical._may_drop: could a key to drop occur in this JSON text?
fn may_drop(text: &[u8], drop: &[Vec<u8>]) -> bool {
    if text.contains(&b'\\') && (contains(text, b"\\u") || escapable(drop)) {
        return true;
    }
    drop.iter().any(|k| contains(text, k))
}

fn escapable(drop: &[Vec<u8>]) -> bool {
    drop.iter().any(|k| k.iter().any(|&c| c == b'/' || c == b'"' || c == b'\\' || c < 0x20))
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

fn write_value(v: &Value, drop: &[Vec<u8>], out: &mut Vec<u8>) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Int(d) => out.extend_from_slice(d),
        Value::Float(f) => write_float(*f, out),
        Value::Str(s) => write_string(s, out),
        Value::Arr(items) => {
            out.push(b'[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(x, drop, out);
            }
            out.push(b']');
        }
        Value::Obj(items) => {
            out.push(b'{');
            let mut first = true;
            for (k, x) in items {
                if !drop.is_empty() && drop.iter().any(|d| d[..] == k[..]) {
                    continue;
                }
                if !first {
                    out.push(b',');
                }
                first = false;
                write_string(k, out);
                out.push(b':');
                write_value(x, drop, out);
            }
            out.push(b'}');
        }
    }
}

/// json's C encode_basestring (ensure_ascii=False).
pub fn write_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(c >> 4) as usize]);
                out.push(HEX[(c & 0xf) as usize]);
            }
            c => out.push(c),
        }
    }
    out.push(b'"');
}

/// `float.__repr__` as json writes it: shortest round-trip digits, fixed notation for
/// decimal exponents -4 < e <= 16 (with ".0" when there is no fraction), else d.ddde+XX.
pub fn write_float(f: f64, out: &mut Vec<u8>) {
    if f.is_nan() {
        out.extend_from_slice(b"NaN");
        return;
    }
    if f.is_infinite() {
        out.extend_from_slice(if f > 0.0 { b"Infinity" } else { b"-Infinity" });
        return;
    }
    if f == 0.0 {
        out.extend_from_slice(if f.is_sign_negative() { b"-0.0" } else { b"0.0" });
        return;
    }
    // Rust's `{:e}` writes the shortest digits that round-trip: "-1.2345e-7".
    let mut sci = String::with_capacity(32);
    let _ = write!(sci, "{:e}", f);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let mut digits: Vec<u8> = mantissa.bytes().filter(|c| c.is_ascii_digit()).collect();
    if digits.len() >= 16 {
        if let Some(even) = tie_to_even(f.abs(), &digits, exp) {
            digits = even;
        }
    }
    let n = digits.len() as i32;
    let decpt = exp + 1; // value = 0.DIGITS * 10^decpt
    if negative {
        out.push(b'-');
    }
    if decpt <= -4 || decpt > 16 {
        out.push(digits[0]);
        if n > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        let e = decpt - 1;
        let _ = write!(sci.clear_and(), "e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
        out.extend_from_slice(sci.as_bytes());
    } else if decpt <= 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat(b'0').take((-decpt) as usize));
        out.extend_from_slice(&digits);
    } else if decpt >= n {
        out.extend_from_slice(&digits);
        out.extend(std::iter::repeat(b'0').take((decpt - n) as usize));
        out.extend_from_slice(b".0");
    } else {
        out.extend_from_slice(&digits[..decpt as usize]);
        out.push(b'.');
        out.extend_from_slice(&digits[decpt as usize..]);
    }
}

/// Python's repr breaks a tie between two shortest candidates to the even last digit (dtoa
/// mode 0): 1000000000000000.25 is "1000000000000000.2". Rust's shortest writer may give the
/// other one ("...0.3"). A tie needs the exact value to have one digit more than the shortest,
/// ending in 5; checked on 19 rounded digits first, then on the exact expansion.
fn tie_to_even(a: f64, digits: &[u8], exp: i32) -> Option<Vec<u8>> {
    let n = digits.len();
    let (x, e) = sci_digits(&format!("{:.18e}", a))?;
    if e != exp || x.len() != n + 1 || x[n] != b'5' {
        return None;
    }
    let (exact, e2) = sci_digits(&format!("{:.800e}", a))?; // every double is exact in 767 digits
    if e2 != exp || exact != x {
        return None;
    }
    let mut even = x[..n].to_vec(); // the lower candidate; the upper one adds one unit
    if (even[n - 1] - b'0') % 2 == 1 {
        let mut i = n;
        loop {
            if i == 0 {
                return None; // carried into a new digit: leave Rust's answer
            }
            i -= 1;
            if even[i] == b'9' {
                even[i] = b'0';
            } else {
                even[i] += 1;
                break;
            }
        }
    }
    while even.len() > 1 && even[even.len() - 1] == b'0' {
        even.pop();
    }
    let text = format!("{}.{}e{}", even[0] as char, std::str::from_utf8(&even[1..]).ok()?, exp);
    let text = if even.len() == 1 { format!("{}e{}", even[0] as char, exp) } else { text };
    (text.parse::<f64>().ok()? == a).then_some(even)
}

/// The significant digits (trailing zeros removed) and exponent of "d.ddde±x".
fn sci_digits(s: &str) -> Option<(Vec<u8>, i32)> {
    let (m, e) = s.split_once('e')?;
    let mut d: Vec<u8> = m.bytes().filter(|c| c.is_ascii_digit()).collect();
    while d.len() > 1 && d[d.len() - 1] == b'0' {
        d.pop();
    }
    Some((d, e.parse().ok()?))
}

trait ClearAnd {
    fn clear_and(&mut self) -> &mut Self;
}

impl ClearAnd for String {
    fn clear_and(&mut self) -> &mut Self {
        self.clear();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim() -> Limits {
        Limits { max_bytes: 256 * 1024, max_depth: 64, max_int_digits: 4300 }
    }

    fn canon(s: &str) -> (bool, String, u32) {
        let c = canonical(s.as_bytes(), &[], &lim());
        (c.json, String::from_utf8(c.text).unwrap(), c.flags)
    }

    #[test]
    fn sorts_keys_and_compacts() {
        assert_eq!(canon(r#" {"b": [1, 2.50], "a": "é"} "#), (true, r#"{"a":"é","b":[1,2.5]}"#.into(), 0));
    }

    #[test]
    fn floats_as_python_repr() {
        let cases = [(1e16, "1e+16"), (1e15, "1000000000000000.0"), (0.0001, "0.0001"), (0.00001, "1e-05"),
                     (1.5e300, "1.5e+300"), (-0.0, "-0.0"), (123.456, "123.456"), (5e-324, "5e-324"),
                     (1000000000000000.2, "1000000000000000.2")];
        for (f, want) in cases {
            let mut out = Vec::new();
            write_float(f, &mut out);
            assert_eq!(String::from_utf8(out).unwrap(), want);
        }
    }

    #[test]
    fn odd_input_is_flagged() {
        assert_eq!(canon("hello").2, OPAQUE | PROSE);
        assert_eq!(canon("{'a': 1}").2, OPAQUE);
        assert_eq!(canon(r#"{"a":1,"a":2}"#), (true, r#"{"a":2}"#.into(), DUPLICATE_KEYS));
        assert_eq!(canon("[NaN,1e999]"), (true, "[NaN,Infinity]".into(), NON_FINITE));
        assert_eq!(canon(r#""{\"b\":1}""#), (true, r#"{"b":1}"#.into(), DOUBLE_ENCODED));
        assert_eq!(canon("-0"), (true, "0".into(), 0));
    }
}
