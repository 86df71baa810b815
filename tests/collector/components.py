"""The OpenTelemetry Collector configuration keys our configs may use, as documented upstream.

The real Collector (scripts/otelcol.sh) validates and runs the configs in
tests/collector/test_pipelines.py; this schema is the check that needs no Go
(tests/collector/test_configs.py). It is deliberately SMALL: only the components
the project's configs use, and for each only keys found in the component's own documentation,
its config schema (`config.schema.yaml`, generated from the Go structs) or its test data. A key
that is not here is an error, even if some Collector release accepts it: add it here, with the
place it is documented, before using it.

Sources (read 2026-11-30 through the stored copies of the repositories; "core" =
github.com/open-telemetry/opentelemetry-collector, "contrib" =
github.com/open-telemetry/opentelemetry-collector-contrib):

- otlp receiver: core receiver/otlpreceiver/README.md and receiver/otlpreceiver/config.md;
  server settings: core config/configgrpc/README.md ("Server Configuration"), TLS: core
  config/configtls/README.md ("Server Configuration").
- otlp exporter: core exporter/otlpexporter/README.md, exporter/otlpexporter/config.schema.yaml,
  exporter/otlpexporter/testdata/config.yaml; client settings: core config/configgrpc/README.md
  ("Client Configuration"); TLS: core config/configtls/README.md.
- otlphttp exporter: core exporter/otlphttpexporter/README.md.
- sending_queue / retry_on_failure / timeout: core exporter/exporterhelper/README.md;
  `randomization_factor` from core exporter/otlpexporter/testdata/config.yaml (configretry).
- batch processor: core processor/batchprocessor/README.md.
- memory_limiter processor: core processor/memorylimiterprocessor/README.md and
  internal/memorylimiter/config.schema.yaml.
- debug exporter: core exporter/debugexporter/README.md.
- loadbalancing / load_balancing exporter: contrib exporter/loadbalancingexporter/README.md,
  config.schema.yaml, config.go (Validate), testdata/config.yaml, trace_exporter.go; the rename to
  `load_balancing` (old name kept as a deprecated alias): contrib PR #48533 (merged 2026-05-19) and
  the README note on https://pkg.go.dev/github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter
  (v0.154.0).
- service.telemetry: https://opentelemetry.io/docs/collector/internal-telemetry/ .
- health_check extension: contrib extension/healthcheckextension/README.md; file_storage
  extension: contrib extension/storage/filestorage/README.md (both also run by the tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional


# -- the schema language -------------------------------------------------------------------


@dataclass(frozen=True)
class Leaf:
    """A scalar (or list of scalars); `choices` restricts the value when given."""

    choices: Optional[frozenset[Any]] = None
    doc: str = ""


@dataclass(frozen=True)
class Map:
    """A mapping with known keys. `free=True`: any keys (e.g. headers), values are scalars."""

    keys: Mapping[str, Any] = field(default_factory=dict)
    free: bool = False
    nullable: bool = True  # `grpc:` with no value is valid YAML for "enabled with defaults"
    doc: str = ""


@dataclass(frozen=True)
class ListOf:
    item: Any
    doc: str = ""


ANY = Leaf()


def leaf(*choices: Any, doc: str = "") -> Leaf:
    return Leaf(frozenset(choices) if choices else None, doc)


def merge(*maps: Map, **extra: Any) -> Map:
    keys: dict[str, Any] = {}
    for m in maps:
        keys.update(m.keys)
    keys.update(extra)
    return Map(keys)


def without(m: Map, *names: str) -> Map:
    return Map({k: v for k, v in m.keys.items() if k not in names}, m.free, m.nullable, m.doc)


# -- shared settings -----------------------------------------------------------------------

# core config/configtls/README.md: common TLS settings, then client- and server-only ones.
_TLS_COMMON = Map({
    "ca_file": ANY, "ca_pem": ANY, "cert_file": ANY, "cert_pem": ANY, "key_file": ANY,
    "key_pem": ANY, "include_system_ca_certs_pool": ANY, "min_version": leaf("1.0", "1.1", "1.2", "1.3"),
    "max_version": leaf("1.0", "1.1", "1.2", "1.3", ""), "cipher_suites": ListOf(ANY),
    "include_insecure_cipher_suites": ANY, "reload_interval": ANY, "curve_preferences": ListOf(ANY),
    "tpm": Map({"enabled": ANY, "path": ANY, "owner_auth": ANY, "auth": ANY}),
})
TLS_CLIENT = merge(_TLS_COMMON, insecure=ANY, insecure_skip_verify=ANY, server_name_override=ANY)
TLS_SERVER = merge(_TLS_COMMON, client_ca_file=ANY, client_ca_file_reload=ANY)

# core config/configauth (referenced from configgrpc/README.md): `auth: {authenticator: <ext>}`.
AUTH = Map({"authenticator": ANY})

# core exporter/exporterhelper/README.md "Retry on Failure"; randomization_factor from
# exporter/otlpexporter/testdata/config.yaml.
RETRY_ON_FAILURE = Map({
    "enabled": ANY, "initial_interval": ANY, "max_interval": ANY, "max_elapsed_time": ANY,
    "multiplier": ANY, "randomization_factor": ANY,
})

# core exporter/exporterhelper/README.md "Sending Queue", "Sending queue batch settings",
# "Persistent Queue". (`blocking` is the older spelling of block_on_overflow; not accepted here.)
SENDING_QUEUE = Map({
    "enabled": ANY, "num_consumers": ANY, "wait_for_result": ANY, "block_on_overflow": ANY,
    "sizer": leaf("requests", "items", "bytes"), "queue_size": ANY, "storage": ANY,
    "batch": Map({"flush_timeout": ANY, "min_size": ANY, "max_size": ANY, "sizer": leaf("items", "bytes")}),
})

# core config/configgrpc/README.md "Client Configuration".
GRPC_CLIENT = Map({
    "endpoint": ANY, "balancer_name": ANY, "compression": leaf("gzip", "snappy", "zstd", "none", ""),
    "tls": TLS_CLIENT, "headers": Map(free=True), "read_buffer_size": ANY, "write_buffer_size": ANY,
    "keepalive": Map({"permit_without_stream": ANY, "time": ANY, "timeout": ANY}),
    "auth": AUTH, "middlewares": ListOf(ANY),
})

# core config/configgrpc/README.md "Server Configuration" + receiver/otlpreceiver/config.md;
# include_metadata: processor/batchprocessor/README.md ("Receivers should be configured with
# include_metadata: true").
GRPC_SERVER = Map({
    "endpoint": ANY, "transport": ANY, "tls": TLS_SERVER, "max_recv_msg_size_mib": ANY,
    "max_concurrent_streams": ANY, "read_buffer_size": ANY, "write_buffer_size": ANY,
    "keepalive": Map({
        "server_parameters": Map({"max_connection_idle": ANY, "max_connection_age": ANY,
                                  "max_connection_age_grace": ANY, "time": ANY, "timeout": ANY}),
        "enforcement_policy": Map({"min_time": ANY, "permit_without_stream": ANY}),
    }),
    "auth": AUTH, "include_metadata": ANY, "middlewares": ListOf(ANY),
})

# receiver/otlpreceiver/README.md ("traces_url_path", CORS) and config.md (confighttp server).
HTTP_SERVER = Map({
    "endpoint": ANY, "tls": TLS_SERVER, "max_request_body_size": ANY, "include_metadata": ANY,
    "auth": AUTH, "cors": Map({"allowed_origins": ListOf(ANY), "allowed_headers": ListOf(ANY), "max_age": ANY}),
    "traces_url_path": ANY, "metrics_url_path": ANY, "logs_url_path": ANY, "profiles_url_path": ANY,
})

# -- components ----------------------------------------------------------------------------

# receivers -------------------------------------------------------------------------------
# core receiver/otlpreceiver/README.md: "A protocol can be disabled by simply not specifying it".
OTLP_RECEIVER = Map({"protocols": Map({"grpc": GRPC_SERVER, "http": HTTP_SERVER}, nullable=False)})

# processors ------------------------------------------------------------------------------
# core processor/batchprocessor/README.md
BATCH = Map({
    "send_batch_size": ANY, "timeout": ANY, "send_batch_max_size": ANY, "metadata_keys": ListOf(ANY),
    "metadata_cardinality_limit": ANY,
})
# core processor/memorylimiterprocessor/README.md ("The following configuration options must be
# changed") and internal/memorylimiter/config.schema.yaml (the two min_gc_* keys).
MEMORY_LIMITER = Map({
    "check_interval": ANY, "limit_mib": ANY, "spike_limit_mib": ANY, "limit_percentage": ANY,
    "spike_limit_percentage": ANY, "min_gc_interval_when_hard_limited": ANY,
    "min_gc_interval_when_soft_limited": ANY,
}, nullable=False)

# exporters -------------------------------------------------------------------------------
# core exporter/otlpexporter/README.md: endpoint, tls, retry_on_failure, sending_queue, timeout,
# plus every gRPC client setting (config.schema.yaml: allOf TimeoutConfig + configgrpc ClientConfig).
OTLP_EXPORTER = merge(GRPC_CLIENT, timeout=ANY, sending_queue=SENDING_QUEUE, retry_on_failure=RETRY_ON_FAILURE)

# core exporter/otlphttpexporter/README.md (+ exporterhelper settings, compression, headers).
OTLPHTTP_EXPORTER = Map({
    "endpoint": ANY, "traces_endpoint": ANY, "metrics_endpoint": ANY, "logs_endpoint": ANY,
    "tls": TLS_CLIENT, "timeout": ANY, "read_buffer_size": ANY, "write_buffer_size": ANY,
    "compression": leaf("gzip", "snappy", "zstd", "none", ""), "headers": Map(free=True),
    "sending_queue": SENDING_QUEUE, "retry_on_failure": RETRY_ON_FAILURE, "auth": AUTH,
})

# core exporter/debugexporter/README.md
DEBUG_EXPORTER = Map({
    "verbosity": leaf("basic", "normal", "detailed"), "sampling_initial": ANY,
    "sampling_thereafter": ANY, "use_internal_logger": ANY, "sending_queue": SENDING_QUEUE,
})

# contrib exporter/loadbalancingexporter: README.md ("Configuration"), config.schema.yaml
# (protocol, resolver, routing_key, routing_attributes, sending_queue, timeout, retry), config.go.
# The resolver's sub-keys: README.md (dns: hostname, port, interval, timeout; k8s: service, ports)
# and config.schema.yaml (k8s: timeout, return_hostnames; aws_cloud_map: ...).
LOADBALANCING_ROUTING_KEYS = frozenset({"service", "traceID", "metric", "resource", "streamID", "attributes"})
# trace_exporter.go newTracesExporter: a traces pipeline accepts only these (others are an error).
LOADBALANCING_TRACE_ROUTING_KEYS = frozenset({"service", "traceID", "attributes"})
RESOLVERS = ("static", "dns", "k8s", "aws_cloud_map")
LOADBALANCING_EXPORTER = Map({
    # README: "the `endpoint` property should not be set and will be overridden by this exporter"
    "protocol": Map({"otlp": without(OTLP_EXPORTER, "endpoint")}, nullable=False),
    "resolver": Map({
        "static": Map({"hostnames": ListOf(ANY)}),
        "dns": Map({"hostname": ANY, "port": ANY, "interval": ANY, "timeout": ANY}),
        "k8s": Map({"service": ANY, "ports": ListOf(ANY), "timeout": ANY, "return_hostnames": ANY}),
        "aws_cloud_map": Map({"namespace": ANY, "service_name": ANY, "port": ANY, "interval": ANY,
                              "timeout": ANY, "health_status": ANY, "owner_account": ANY}),
    }, nullable=False),
    "routing_key": Leaf(LOADBALANCING_ROUTING_KEYS),
    # config.schema.yaml: "Keys are encoded as name=value|name=value| in the order configured.
    # Missing attributes are encoded as name=|." config.go Validate(): required iff
    # routing_key == attributes.
    "routing_attributes": ListOf(ANY),
    # config.schema.yaml (sending_queue, TimeoutConfig, configretry BackOffConfig) and
    # testdata/config.yaml ("the OTLP exporter configuration sending_queue values will be ignored").
    "sending_queue": SENDING_QUEUE, "timeout": ANY, "retry_on_failure": RETRY_ON_FAILURE,
}, nullable=False)

RECEIVERS: dict[str, Map] = {"otlp": OTLP_RECEIVER}
PROCESSORS: dict[str, Map] = {"batch": BATCH, "memory_limiter": MEMORY_LIMITER}
EXPORTERS: dict[str, Map] = {
    "otlp": OTLP_EXPORTER,
    "otlphttp": OTLPHTTP_EXPORTER,
    "debug": DEBUG_EXPORTER,
    # Renamed in contrib (PR #48533); `loadbalancing` is kept as a deprecated alias. Both spellings
    # have the same keys; collector_config/ uses `loadbalancing` (works on releases before and
    # after the rename).
    "loadbalancing": LOADBALANCING_EXPORTER,
    "load_balancing": LOADBALANCING_EXPORTER,
}
LOADBALANCING_TYPES = frozenset({"loadbalancing", "load_balancing"})
CONNECTORS: dict[str, Map] = {}
# contrib extension/healthcheckextension/README.md; extension/storage/filestorage/README.md.
EXTENSIONS: dict[str, Map] = {
    "health_check": Map({"endpoint": ANY, "path": ANY, "response_body": ANY, "check_collector_pipeline": ANY,
                         "tls": TLS_SERVER}),
    "file_storage": Map({"directory": ANY, "timeout": ANY, "create_directory": ANY, "directory_permissions": ANY,
                         "fsync": ANY, "compaction": Map(free=True)}),
}

# -- service ---------------------------------------------------------------------------------

PIPELINE_SIGNALS = frozenset({"traces", "metrics", "logs"})
PIPELINE = Map({"receivers": ListOf(ANY), "processors": ListOf(ANY), "exporters": ListOf(ANY)}, nullable=False)

# https://opentelemetry.io/docs/collector/internal-telemetry/ : metrics.level (none, basic, normal,
# detailed), metrics.readers (pull/periodic, the SDK declarative schema: left open here), logs.*,
# resource. (`metrics.address` is the older form; not accepted here.)
TELEMETRY = Map({
    "logs": Map({"level": leaf("debug", "info", "warn", "error"), "encoding": leaf("console", "json"),
                 "output_paths": ListOf(ANY), "error_output_paths": ListOf(ANY), "development": ANY,
                 "disable_caller": ANY, "disable_stacktrace": ANY, "initial_fields": Map(free=True),
                 "sampling": Map(free=True)}),
    "metrics": Map({"level": leaf("none", "basic", "normal", "detailed"), "readers": ListOf(Map(free=True))}),
    "resource": Map(free=True),
})

SERVICE_KEYS = frozenset({"pipelines", "telemetry", "extensions"})
TOP_LEVEL_KEYS = frozenset({"receivers", "processors", "exporters", "connectors", "extensions", "service"})
COMPONENT_KINDS: dict[str, dict[str, Map]] = {
    "receivers": RECEIVERS,
    "processors": PROCESSORS,
    "exporters": EXPORTERS,
    "connectors": CONNECTORS,
    "extensions": EXTENSIONS,
}
