//! An OTLP `ExportTraceServiceRequest`, read from its wire bytes: a hand-rolled protobuf
//! reader (safe Rust, no allocation while validating). The Python reference is
//! `otel_loopguard/receiver/ingest/decode.py` over protobuf's upb parser; this module refuses exactly
//! what upb refuses, with the same status, and reads values with upb's semantics (the last of
//! a repeated singular field wins, a message field seen twice is merged, an AnyValue switching
//! its case forgets the old one, a field of the wrong wire type is an unknown field).
//!
//! Two steps: `validate` walks the whole request once (framing, UTF-8 of every string field,
//! nesting depth) and counts its spans; `spans` then walks the valid request span by span.

use std::collections::HashMap;

/// upb's statuses, as protobuf's Python runtime words them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    Malformed,
    BadUtf8,
    MaxDepth,
}

impl Error {
    pub fn message(self) -> &'static str {
        match self {
            Error::Malformed => "Wire format was corrupt",
            Error::BadUtf8 => "String field had bad UTF-8",
            Error::MaxDepth => "Exceeded upb_DecodeOptions_MaxDepth",
        }
    }
}

/// The deepest a message or group may sit (the request itself at 1): upb's limit of 100 as
/// protobuf's Python runtime applies it, measured (tests/native/test_decode_differential.py).
pub const MAX_LEVEL: u32 = 101;

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const START_GROUP: u8 = 3;
const END_GROUP: u8 = 4;
const FIXED32: u8 = 5;

/// A message's fields: `buf` is the whole request and `limit` where this message ends. Reads
/// may run past the limit as far as the request goes, as upb's do (a field straddling the
/// limit is found out after it is read: what is checked while reading it still counts).
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    limit: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0, limit: buf.len() }
    }

    fn within(buf: &'a [u8], pos: usize, limit: usize) -> Self {
        Reader { buf, pos, limit }
    }

    pub fn done(&self) -> bool {
        self.pos >= self.limit
    }

    /// After the last field: a message ends exactly at its limit.
    fn finish(&self) -> Result<(), Error> {
        if self.pos == self.limit { Ok(()) } else { Err(Error::Malformed) }
    }

    fn byte(&mut self) -> Result<u8, Error> {
        let byte = *self.buf.get(self.pos).ok_or(Error::Malformed)?;
        self.pos += 1;
        Ok(byte)
    }

    /// Up to ten bytes; bits past 64 are dropped, as upb drops them.
    pub fn varint(&mut self) -> Result<u64, Error> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Error::Malformed)
    }

    /// (field number, wire type): at most five bytes holding at most 32 bits, a field number
    /// above 0 and a wire type protobuf defines.
    pub fn tag(&mut self) -> Result<(u32, u8), Error> {
        let mut value: u64 = 0;
        for i in 0..5 {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                if value > u64::from(u32::MAX) || value >> 3 == 0 || (value & 7) > 5 {
                    return Err(Error::Malformed);
                }
                return Ok(((value >> 3) as u32, (value & 7) as u8));
            }
        }
        Err(Error::Malformed)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if n > self.buf.len() - self.pos {
            return Err(Error::Malformed);
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    pub fn fixed64(&mut self) -> Result<u64, Error> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().map_err(|_| Error::Malformed)?))
    }

    /// A length-delimited value, which must end within this message: (start, end) in `buf`.
    fn delimited(&mut self) -> Result<(usize, usize), Error> {
        let n = self.varint()?;
        if self.pos > self.limit || n > (self.limit - self.pos) as u64 {
            return Err(Error::Malformed);
        }
        let start = self.pos;
        self.pos += n as usize;
        Ok((start, self.pos))
    }

    pub fn len_delimited(&mut self) -> Result<&'a [u8], Error> {
        let (start, end) = self.delimited()?;
        Ok(&self.buf[start..end])
    }

    /// A string field as upb checks it: the length within the request, then the text's UTF-8,
    /// then the length within this message.
    fn checked_string(&mut self) -> Result<(), Error> {
        let n = self.varint()?;
        if n > (self.buf.len() - self.pos) as u64 {
            return Err(Error::Malformed);
        }
        let end = self.pos + n as usize;
        std::str::from_utf8(&self.buf[self.pos..end]).map_err(|_| Error::BadUtf8)?;
        if end > self.limit {
            return Err(Error::Malformed);
        }
        self.pos = end;
        Ok(())
    }

    /// Skips a value of a scalar wire type or a length-delimited one; a group is the caller's.
    fn skip_plain(&mut self, wire: u8) -> Result<(), Error> {
        match wire {
            VARINT => self.varint().map(drop),
            FIXED64 => self.take(8).map(drop),
            LEN => self.len_delimited().map(drop),
            FIXED32 => self.take(4).map(drop),
            _ => Err(Error::Malformed),
        }
    }

    /// Skips a group whose start tag (field `number`) was just read, nested groups included,
    /// the group sitting at `level`.
    fn skip_group(&mut self, number: u32, level: u32) -> Result<(), Error> {
        if level > MAX_LEVEL {
            return Err(Error::Malformed); // upb words a too deep unknown group so
        }
        loop {
            if self.done() {
                return Err(Error::Malformed);
            }
            let (field, wire) = self.tag()?;
            match wire {
                START_GROUP => self.skip_group(field, level + 1)?,
                END_GROUP if field == number => return Ok(()),
                END_GROUP => return Err(Error::Malformed),
                _ => self.skip_plain(wire)?,
            }
        }
    }

    /// Skips any field's value in a message at `level` (an end-group tag there is an error).
    pub fn skip(&mut self, field: u32, wire: u8, level: u32) -> Result<(), Error> {
        match wire {
            START_GROUP => self.skip_group(field, level + 1),
            END_GROUP => Err(Error::Malformed),
            _ => self.skip_plain(wire),
        }
    }
}

// -- the schema: what a length-delimited field of each message holds --------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msg {
    TracesData,
    ResourceSpans,
    Resource,
    EntityRef,
    ScopeSpans,
    Scope,
    Span,
    Event,
    Link,
    Status,
    KeyValue,
    AnyValue,
    ArrayValue,
    KeyValueList,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Str,
    Bytes,
    Message(Msg),
}

/// Every length-delimited field of the request's messages (trace.proto, common.proto,
/// resource.proto as installed): a test holds it to protobuf's own descriptors. Any other
/// field, or one of these with another wire type, is unknown and skipped.
pub const SCHEMA: &[(Msg, u32, Kind)] = &[
    (Msg::TracesData, 1, Kind::Message(Msg::ResourceSpans)),
    (Msg::ResourceSpans, 1, Kind::Message(Msg::Resource)),
    (Msg::ResourceSpans, 2, Kind::Message(Msg::ScopeSpans)),
    (Msg::ResourceSpans, 3, Kind::Str),
    (Msg::Resource, 1, Kind::Message(Msg::KeyValue)),
    (Msg::Resource, 3, Kind::Message(Msg::EntityRef)),
    (Msg::EntityRef, 1, Kind::Str),
    (Msg::EntityRef, 2, Kind::Str),
    (Msg::EntityRef, 3, Kind::Str),
    (Msg::EntityRef, 4, Kind::Str),
    (Msg::ScopeSpans, 1, Kind::Message(Msg::Scope)),
    (Msg::ScopeSpans, 2, Kind::Message(Msg::Span)),
    (Msg::ScopeSpans, 3, Kind::Str),
    (Msg::Scope, 1, Kind::Str),
    (Msg::Scope, 2, Kind::Str),
    (Msg::Scope, 3, Kind::Message(Msg::KeyValue)),
    (Msg::Span, 1, Kind::Bytes),
    (Msg::Span, 2, Kind::Bytes),
    (Msg::Span, 3, Kind::Str),
    (Msg::Span, 4, Kind::Bytes),
    (Msg::Span, 5, Kind::Str),
    (Msg::Span, 9, Kind::Message(Msg::KeyValue)),
    (Msg::Span, 11, Kind::Message(Msg::Event)),
    (Msg::Span, 13, Kind::Message(Msg::Link)),
    (Msg::Span, 15, Kind::Message(Msg::Status)),
    (Msg::Event, 2, Kind::Str),
    (Msg::Event, 3, Kind::Message(Msg::KeyValue)),
    (Msg::Link, 1, Kind::Bytes),
    (Msg::Link, 2, Kind::Bytes),
    (Msg::Link, 3, Kind::Str),
    (Msg::Link, 4, Kind::Message(Msg::KeyValue)),
    (Msg::Status, 2, Kind::Str),
    (Msg::KeyValue, 1, Kind::Str),
    (Msg::KeyValue, 2, Kind::Message(Msg::AnyValue)),
    (Msg::AnyValue, 1, Kind::Str),
    (Msg::AnyValue, 5, Kind::Message(Msg::ArrayValue)),
    (Msg::AnyValue, 6, Kind::Message(Msg::KeyValueList)),
    (Msg::AnyValue, 7, Kind::Bytes),
    (Msg::ArrayValue, 1, Kind::Message(Msg::AnyValue)),
    (Msg::KeyValueList, 1, Kind::Message(Msg::KeyValue)),
];

impl Msg {
    /// The message's name in the .proto files.
    pub fn name(self) -> &'static str {
        match self {
            Msg::TracesData => "TracesData",
            Msg::ResourceSpans => "ResourceSpans",
            Msg::Resource => "Resource",
            Msg::EntityRef => "EntityRef",
            Msg::ScopeSpans => "ScopeSpans",
            Msg::Scope => "InstrumentationScope",
            Msg::Span => "Span",
            Msg::Event => "Event",
            Msg::Link => "Link",
            Msg::Status => "Status",
            Msg::KeyValue => "KeyValue",
            Msg::AnyValue => "AnyValue",
            Msg::ArrayValue => "ArrayValue",
            Msg::KeyValueList => "KeyValueList",
        }
    }
}

/// SCHEMA's entry for a field, as a match (a lookup per length-delimited field of a request).
fn kind_of(msg: Msg, field: u32) -> Option<Kind> {
    use Kind::{Bytes, Message as M, Str};
    Some(match (msg, field) {
        (Msg::TracesData, 1) => M(Msg::ResourceSpans),
        (Msg::ResourceSpans, 1) => M(Msg::Resource),
        (Msg::ResourceSpans, 2) => M(Msg::ScopeSpans),
        (Msg::ResourceSpans | Msg::ScopeSpans, 3) => Str,
        (Msg::Resource, 3) => M(Msg::EntityRef),
        (Msg::Resource, 1) | (Msg::Scope, 3) | (Msg::Event, 3) | (Msg::Link, 4) | (Msg::KeyValueList, 1) => {
            M(Msg::KeyValue)
        }
        (Msg::EntityRef, 1..=4) => Str,
        (Msg::ScopeSpans, 1) => M(Msg::Scope),
        (Msg::ScopeSpans, 2) => M(Msg::Span),
        (Msg::Scope, 1 | 2) => Str,
        (Msg::Span | Msg::Link, 1 | 2) | (Msg::Span, 4) => Bytes,
        (Msg::Span, 3 | 5) | (Msg::Link, 3) => Str,
        (Msg::Span, 9) => M(Msg::KeyValue),
        (Msg::Span, 11) => M(Msg::Event),
        (Msg::Span, 13) => M(Msg::Link),
        (Msg::Span, 15) => M(Msg::Status),
        (Msg::Event | Msg::Status, 2) => Str,
        (Msg::KeyValue, 1) => Str,
        (Msg::KeyValue, 2) | (Msg::ArrayValue, 1) => M(Msg::AnyValue),
        (Msg::AnyValue, 1) => Str,
        (Msg::AnyValue, 5) => M(Msg::ArrayValue),
        (Msg::AnyValue, 6) => M(Msg::KeyValueList),
        (Msg::AnyValue, 7) => Bytes,
        _ => return None,
    })
}

/// Checks every byte of a request as upb's parse does and counts its spans.
pub fn validate(data: &[u8]) -> Result<usize, Error> {
    let mut spans = 0;
    validate_message(&mut Reader::new(data), Msg::TracesData, 1, &mut spans)?;
    Ok(spans)
}

fn validate_message(r: &mut Reader<'_>, msg: Msg, level: u32, spans: &mut usize) -> Result<(), Error> {
    while !r.done() {
        let (field, wire) = r.tag()?;
        if wire != LEN {
            r.skip(field, wire, level)?;
            continue;
        }
        match kind_of(msg, field) {
            Some(Kind::Str) => r.checked_string()?,
            Some(Kind::Message(inner)) => {
                let (start, end) = r.delimited()?;
                if level + 1 > MAX_LEVEL {
                    return Err(Error::MaxDepth);
                }
                if inner == Msg::Span {
                    *spans += 1;
                }
                validate_message(&mut Reader::within(r.buf, start, end), inner, level + 1, spans)?;
            }
            Some(Kind::Bytes) | None => {
                r.delimited()?;
            }
        }
    }
    r.finish()
}

// -- reading a valid request --------------------------------------------------------------

/// Text of a string field already validated (a failure here is a bug: reported as corrupt).
fn text(body: &[u8]) -> Result<&str, Error> {
    std::str::from_utf8(body).map_err(|_| Error::Malformed)
}

/// Calls `each(r, s, i, span bytes)` for every span, in request order.
pub fn spans<'a, F>(data: &'a [u8], mut each: F) -> Result<(), Error>
where
    F: FnMut((usize, usize, usize), &'a [u8]) -> Result<(), Error>,
{
    let mut r_index = 0;
    let mut top = Reader::new(data);
    while !top.done() {
        let (field, wire) = top.tag()?;
        if !(field == 1 && wire == LEN) {
            top.skip(field, wire, 1)?;
            continue;
        }
        let mut rs = Reader::new(top.len_delimited()?);
        let mut s_index = 0;
        while !rs.done() {
            let (field, wire) = rs.tag()?;
            if !(field == 2 && wire == LEN) {
                rs.skip(field, wire, 2)?;
                continue;
            }
            let mut ss = Reader::new(rs.len_delimited()?);
            let mut i_index = 0;
            while !ss.done() {
                let (field, wire) = ss.tag()?;
                if !(field == 2 && wire == LEN) {
                    ss.skip(field, wire, 3)?;
                    continue;
                }
                each((r_index, s_index, i_index), ss.len_delimited()?)?;
                i_index += 1;
            }
            s_index += 1;
        }
        r_index += 1;
    }
    Ok(())
}

/// One attribute: its key and the KeyValue's bytes (its value is read only when asked).
#[derive(Debug, Clone, Copy)]
pub struct Attr<'a> {
    pub key: &'a str,
    pub entry: &'a [u8],
}

/// What the decode reads of every span.
#[derive(Debug, Default)]
pub struct SpanView<'a> {
    pub trace_id: &'a [u8],
    pub span_id: &'a [u8],
    pub parent: &'a [u8],
    pub name: &'a str,
    pub start: u64,
    pub end: u64,
    pub status: i32,
    pub attrs: Vec<Attr<'a>>,
    pub events: Vec<&'a [u8]>,
}

/// Fills `view` from a span's bytes (its vectors cleared first: one view serves a request).
pub fn read_span<'a>(body: &'a [u8], view: &mut SpanView<'a>) -> Result<(), Error> {
    view.trace_id = b"";
    view.span_id = b"";
    view.parent = b"";
    view.name = "";
    view.start = 0;
    view.end = 0;
    view.status = 0;
    view.attrs.clear();
    view.events.clear();
    let mut r = Reader::new(body);
    while !r.done() {
        let (field, wire) = r.tag()?;
        match (field, wire) {
            (1, LEN) => view.trace_id = r.len_delimited()?,
            (2, LEN) => view.span_id = r.len_delimited()?,
            (4, LEN) => view.parent = r.len_delimited()?,
            (5, LEN) => view.name = text(r.len_delimited()?)?,
            (7, FIXED64) => view.start = r.fixed64()?,
            (8, FIXED64) => view.end = r.fixed64()?,
            (9, LEN) => {
                let entry = r.len_delimited()?;
                view.attrs.push(Attr { key: key_of(entry)?, entry });
            }
            (11, LEN) => view.events.push(r.len_delimited()?),
            (15, LEN) => {
                if let Some(code) = status_code(r.len_delimited()?)? {
                    view.status = code;
                }
            }
            _ => r.skip(field, wire, 4)?,
        }
    }
    Ok(())
}

/// A Status's code if it carries one (an enum: the low 32 bits, signed).
fn status_code(body: &[u8]) -> Result<Option<i32>, Error> {
    let mut code = None;
    let mut r = Reader::new(body);
    while !r.done() {
        let (field, wire) = r.tag()?;
        if field == 3 && wire == VARINT {
            code = Some(r.varint()? as u32 as i32);
        } else {
            r.skip(field, wire, 5)?;
        }
    }
    Ok(code)
}

/// A KeyValue's key: its last key field, else "".
pub fn key_of(entry: &[u8]) -> Result<&str, Error> {
    let mut key = "";
    let mut r = Reader::new(entry);
    while !r.done() {
        let (field, wire) = r.tag()?;
        if field == 1 && wire == LEN {
            key = text(r.len_delimited()?)?;
        } else {
            r.skip(field, wire, 6)?;
        }
    }
    Ok(key)
}

/// An event's (name, time, attributes).
pub fn read_event(body: &[u8]) -> Result<(&str, u64, Vec<Attr<'_>>), Error> {
    let (mut name, mut time, mut attrs) = ("", 0, Vec::new());
    let mut r = Reader::new(body);
    while !r.done() {
        let (field, wire) = r.tag()?;
        match (field, wire) {
            (1, FIXED64) => time = r.fixed64()?,
            (2, LEN) => name = text(r.len_delimited()?)?,
            (3, LEN) => {
                let entry = r.len_delimited()?;
                attrs.push(Attr { key: key_of(entry)?, entry });
            }
            _ => r.skip(field, wire, 6)?,
        }
    }
    Ok((name, time, attrs))
}

/// An AnyValue after merging every value field of a KeyValue (or one element of an array).
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    None,
    Str(&'a str),
    Bool(bool),
    Int(i64),
    Double(f64),
    Bytes(&'a [u8]),
    /// string_value_strindex: an int32 in the same oneof.
    Index(i32),
    /// The ArrayValue messages to merge (their elements, in order).
    Array(Vec<&'a [u8]>),
    /// The KeyValueList messages to merge.
    KvList(Vec<&'a [u8]>),
}

impl<'a> Value<'a> {
    /// Applies one AnyValue message's fields (a later message merges into the earlier).
    fn merge(&mut self, body: &'a [u8]) -> Result<(), Error> {
        let mut r = Reader::new(body);
        while !r.done() {
            let (field, wire) = r.tag()?;
            match (field, wire) {
                (1, LEN) => *self = Value::Str(text(r.len_delimited()?)?),
                (2, VARINT) => *self = Value::Bool(r.varint()? != 0),
                (3, VARINT) => *self = Value::Int(r.varint()? as i64),
                (4, FIXED64) => *self = Value::Double(f64::from_bits(r.fixed64()?)),
                (5, LEN) => {
                    let part = r.len_delimited()?;
                    match self {
                        Value::Array(parts) => parts.push(part),
                        _ => *self = Value::Array(vec![part]),
                    }
                }
                (6, LEN) => {
                    let part = r.len_delimited()?;
                    match self {
                        Value::KvList(parts) => parts.push(part),
                        _ => *self = Value::KvList(vec![part]),
                    }
                }
                (7, LEN) => *self = Value::Bytes(r.len_delimited()?),
                (8, VARINT) => *self = Value::Index(r.varint()? as u32 as i32),
                _ => r.skip(field, wire, 7)?,
            }
        }
        Ok(())
    }

    /// The text of a string value, "" for any other (protobuf's `string_value`).
    pub fn string_value(&self) -> &'a str {
        match self {
            Value::Str(s) => s,
            _ => "",
        }
    }
}

/// The value of a KeyValue: every value field merged, in order.
pub fn value_of(entry: &[u8]) -> Result<Value<'_>, Error> {
    let mut value = Value::None;
    let mut r = Reader::new(entry);
    while !r.done() {
        let (field, wire) = r.tag()?;
        if field == 2 && wire == LEN {
            value.merge(r.len_delimited()?)?;
        } else {
            r.skip(field, wire, 6)?;
        }
    }
    Ok(value)
}

/// An AnyValue message alone (an array element).
pub fn any_value(body: &[u8]) -> Result<Value<'_>, Error> {
    let mut value = Value::None;
    value.merge(body)?;
    Ok(value)
}

/// The elements of merged ArrayValue messages, or the KeyValues of merged KeyValueLists:
/// field 1 of each part, in order.
pub fn elements<'a>(parts: &[&'a [u8]]) -> Result<Vec<&'a [u8]>, Error> {
    let mut out = Vec::new();
    for part in parts {
        let mut r = Reader::new(part);
        while !r.done() {
            let (field, wire) = r.tag()?;
            if field == 1 && wire == LEN {
                out.push(r.len_delimited()?);
            } else {
                r.skip(field, wire, 7)?;
            }
        }
    }
    Ok(out)
}

// -- the attributes of one span as a map ----------------------------------------------------

/// std's keyed hash, as Python's dict has one: keys come from the network, and a span whose
/// keys were made to collide must not cost more than its size.
pub type KeyMap<'a> = HashMap<&'a str, usize>;

/// key -> index of its last KeyValue (the last one wins, as in protobuf's map and a dict).
pub fn index_attrs<'a>(attrs: &[Attr<'a>], map: &mut KeyMap<'a>) {
    map.clear();
    for (i, a) in attrs.iter().enumerate() {
        map.insert(a.key, i);
    }
}

// -- which attributes a span needs read (decode.py's _plan_of) ------------------------------

/// marker value -> (rank, plan index).
pub type MarkerValues = HashMap<String, (u32, usize)>;

/// The tables decode.py derives from conventions/spec.py, handed over once.
#[derive(Debug, Default, Clone)]
pub struct Plans {
    /// Any of these present makes a span worth a closer look.
    pub any_keys: Vec<String>,
    /// marker key -> {marker value -> (rank, plan)}, in decode.py's order.
    pub markers: Vec<(String, MarkerValues)>,
    pub tool_name: String,
    pub tagged_rank: u32,
    pub tagged_plan: usize,
    pub facts_plan: usize,
    pub facts_keys: Vec<String>,
    /// The plans: keys to read, in order.
    pub plans: Vec<Vec<String>>,
}

impl Plans {
    /// The plan of a span, by index, or None (most spans carry no marker at all).
    pub fn plan_of(&self, attrs: &[Attr<'_>], map: &KeyMap<'_>) -> Result<Option<usize>, Error> {
        if !self.any_keys.iter().any(|k| map.contains_key(k.as_str())) {
            return Ok(None);
        }
        let mut best: Option<(u32, usize)> = None;
        for (key, values) in &self.markers {
            if let Some(&i) = map.get(key.as_str()) {
                let marker = value_of(attrs[i].entry)?;
                if let Some(&found) = values.get(marker.string_value()) {
                    if best.is_none_or(|b| found.0 < b.0) {
                        best = Some(found);
                    }
                }
            }
        }
        if map.contains_key(self.tool_name.as_str()) && best.is_none_or(|b| b.0 > self.tagged_rank) {
            return Ok(Some(self.tagged_plan));
        }
        match best {
            Some((_, plan)) => Ok(Some(plan)),
            None if self.facts_keys.iter().any(|k| map.contains_key(k.as_str())) => Ok(Some(self.facts_plan)),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut n: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }

    fn ld(field: u32, body: &[u8]) -> Vec<u8> {
        let mut out = varint(u64::from(field << 3 | 2));
        out.extend(varint(body.len() as u64));
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn statuses_as_upb_gives_them() {
        assert_eq!(validate(b""), Ok(0));
        assert_eq!(validate(b"\x0a\x05"), Err(Error::Malformed));
        assert_eq!(validate(b"\x00\x00"), Err(Error::Malformed));
        assert_eq!(validate(b"\x0c"), Err(Error::Malformed));
        assert_eq!(validate(b"\x0b\x0c"), Ok(0));
        assert_eq!(validate(b"\x1b\x24"), Err(Error::Malformed));
        assert_eq!(validate(&ld(1, &ld(3, b"\xff"))), Err(Error::BadUtf8));
        assert_eq!(validate(b"\xf8\xff\xff\xff\x0f\x00"), Ok(0));
        assert_eq!(validate(b"\xf8\xff\xff\xff\x1f\x00"), Err(Error::Malformed));
        let mut ten = vec![0x10];
        ten.extend([0xff; 9]);
        ten.push(0x7f);
        assert_eq!(validate(&ten), Ok(0));
    }

    #[test]
    fn nesting_limits() {
        let groups = |n: usize| [vec![0x2b; n], vec![0x2c; n]].concat();
        assert_eq!(validate(&groups(100)), Ok(0));
        assert_eq!(validate(&groups(101)), Err(Error::Malformed));
        let mut value = Vec::new();
        for _ in 0..48 {
            value = ld(5, &ld(1, &value));
        }
        let span = [ld(1, &[1; 16]), ld(2, &[2; 8]), ld(9, &[ld(1, b"k"), ld(2, &value)].concat())].concat();
        assert_eq!(validate(&ld(1, &ld(2, &ld(2, &span)))), Err(Error::MaxDepth));
    }

    #[test]
    fn the_match_is_the_schema() {
        for &(msg, field, kind) in SCHEMA {
            assert_eq!(kind_of(msg, field), Some(kind), "{msg:?} {field}");
        }
        let all = [Msg::TracesData, Msg::ResourceSpans, Msg::Resource, Msg::EntityRef, Msg::ScopeSpans, Msg::Scope,
                   Msg::Span, Msg::Event, Msg::Link, Msg::Status, Msg::KeyValue, Msg::AnyValue, Msg::ArrayValue,
                   Msg::KeyValueList];
        let listed = |m: Msg, f: u32| SCHEMA.iter().any(|(a, b, _)| *a == m && *b == f);
        for msg in all {
            for field in 0..40 {
                assert_eq!(kind_of(msg, field).is_some(), listed(msg, field), "{msg:?} {field}");
            }
        }
    }

    #[test]
    fn merged_values() {
        let a = ld(2, &ld(5, &ld(1, &ld(1, b"x"))));
        let b = ld(2, &ld(5, &ld(1, &ld(1, b"y"))));
        match value_of(&[a.clone(), b].concat()).unwrap() {
            Value::Array(parts) => assert_eq!(elements(&parts).unwrap().len(), 2),
            other => panic!("{other:?}"),
        }
        let s = ld(2, &ld(1, b"s"));
        assert_eq!(value_of(&[a, s].concat()).unwrap(), Value::Str("s"));
    }
}
