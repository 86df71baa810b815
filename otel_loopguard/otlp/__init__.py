"""OTLP protobuf and OTLP/JSON decoding shared by the audit reader (and the receiver)."""
