"""OTLP AnyValue / KeyValue <-> plain Python values."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue

MAX_VALUE_DEPTH = 32


def any_value(v: AnyValue, depth: int = 0) -> Any:
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(x, depth + 1) for x in v.array_value.values] if depth < MAX_VALUE_DEPTH else None
    if kind == "kvlist_value":
        return attributes(v.kvlist_value.values, depth + 1) if depth < MAX_VALUE_DEPTH else None
    return getattr(v, kind)


def attributes(kvs: Iterable[KeyValue], depth: int = 0) -> dict[str, Any]:
    return {kv.key: any_value(kv.value, depth) for kv in kvs}


def to_any_value(v: Any) -> AnyValue:
    """The inverse of any_value for scalars and sequences; anything else as its text."""
    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    if isinstance(v, (list, tuple)):
        return AnyValue(array_value=ArrayValue(values=[to_any_value(x) for x in v]))
    return AnyValue(string_value=str(v))


def to_key_values(values: Mapping[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=to_any_value(v)) for k, v in values.items()]
