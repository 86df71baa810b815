"""Receiver settings: flags beat OTEL_LOOPGUARD_* variables beat a config file beat defaults."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping, Optional
from urllib.parse import unquote, urlsplit

from ..errors import LoopguardError
from ..canon.keys import ENV_KEY, ENV_KEY_FILE


class ConfigError(LoopguardError):
    """A receiver setting is invalid; the message names the setting."""


@dataclass(frozen=True)
class ReceiverConfig:
    listen: str = "127.0.0.1:4327"
    forward: Optional[str] = None  # inline mode: every unique span + findings go here
    findings_only: bool = False  # spans reach the backend another way; only findings are sent
    policy: Optional[str] = None
    key_file: Optional[str] = None
    max_receive_bytes: int = 64 * 1024 * 1024  # gRPC's default is 4 MiB
    metrics_listen: Optional[str] = None  # HOST:PORT of the Prometheus text endpoint
    gap_wait_seconds: float = 10.0  # a sequence gap older than this makes the run incomplete
    dense_seq: bool = False  # every loopguard.seq is numbered 1..N (default: only those marked so)
    root_grace_seconds: float = 2.0  # after the root span ended, wait this long for stragglers
    idle_timeout_seconds: float = 30.0  # a run with no new span for this long is complete
    late_cache_size: int = 100_000  # completed run ids remembered to recognise late spans
    late_cache_seconds: float = 300.0
    dedupe_size: int = 1_000_000  # (trace id, span id) pairs remembered
    dedupe_seconds: float = 600.0
    max_buffered_calls: int = 1_000_000  # backpressure above this many buffered calls
    max_open_runs: int = 100_000  # ... or this many open runs
    # Every structure that grows with traffic counts toward this (receiver/ops/budget.py): the dedupe
    # table, open runs, the forward and finding queues, requests being decoded.
    memory_limit_mib: int = 1024
    max_request_spans: int = 100_000  # a request with more is refused: send smaller batches
    forward_timeout_seconds: float = 5.0  # per delivery attempt, retries included
    # Inline mode answers a sender once its spans are queued for the downstream, up to this many
    # bytes (then UNAVAILABLE); 0: answer only once the downstream took them (delivery.py).
    forward_queue_bytes: int = 256 * 1024 * 1024
    forward_consumers: int = 4  # requests sent to the downstream at once from that queue
    # A directory for what a restart must not lose (state.py): the forward queue, the dedupe
    # keys, the time the receiver was last alive. None: all of it in memory only.
    state_dir: Optional[str] = None
    state_fsync: bool = False  # force each queue and dedupe write to disk before the answer
    # After a restart with a state_dir: runs first seen this long after start that hold a span
    # begun while the previous receiver was alive are marked incomplete_trace (restart.py).
    restart_window_seconds: float = 300.0
    # With a state_dir, on SIGTERM: wait up to this long for a successor to announce itself on the
    # same state directory before stopping (serving meanwhile); one that did is waited for until
    # it listens (state/handover.py). 0: stop at once unless one announced itself already.
    handover_wait_seconds: float = 0.0
    retry_after_seconds: float = 1.0  # RetryInfo sent with UNAVAILABLE
    insecure: bool = True  # plaintext gRPC downstream; false: TLS with the system's roots
    run_id_attribute: Optional[str] = None  # e.g. gen_ai.conversation.id (default: trace id)
    # The downstream exporter, as the OTLP exporter settings describe it (OTEL_EXPORTER_OTLP_*).
    # Headers often carry API keys: never shown in a repr, a log line or an error.
    headers: Optional[str] = field(default=None, repr=False)  # "key=value,key2=value2"
    certificate_file: Optional[str] = None  # CA bundle (PEM) to verify the downstream; implies TLS
    client_certificate_file: Optional[str] = None  # mTLS: our certificate chain (PEM)
    client_key_file: Optional[str] = None  # mTLS: its private key (PEM)
    compression: str = "none"  # or "gzip"
    # Who may send (the listen side and /metrics): TLS, mutual TLS, bearer tokens (docs/security.md).
    tls_cert_file: Optional[str] = None  # our certificate chain (PEM); turns TLS on
    tls_key_file: Optional[str] = None  # its private key (PEM)
    tls_client_ca_file: Optional[str] = None  # mutual TLS: clients need a certificate this CA issued
    auth_token_file: Optional[str] = None  # accepted bearer tokens, one a line
    auth_tokens: Optional[str] = field(default=None, repr=False)  # comma-separated; never on a command line
    reload_poll_seconds: float = 2.0  # look at the policy, certificate and token files this often (0: SIGHUP only)
    # Opt-in: each stop finding also as a Phoenix trace annotation (receiver/out/phoenix.py), e.g.
    # http://127.0.0.1:6006. Its API key, if Phoenix asks for one, by environment or file only.
    annotate_phoenix_url: Optional[str] = None
    phoenix_api_key: Optional[str] = field(default=None, repr=False)

    @property
    def tls(self) -> bool:
        return not self.insecure or bool(self.certificate_file or self.client_certificate_file)

    def validate(self) -> "ReceiverConfig":
        if self.forward and not _host_port(self.forward, lowest=1):
            raise ConfigError(f"forward: expected HOST:PORT with a port of 1-65535, got {self.forward!r}")
        if not _host_port(self.listen, lowest=0):
            raise ConfigError(f"listen: expected HOST:PORT with a port of 0-65535 (0: any free port), got {self.listen!r}")
        if self.metrics_listen and not _host_port(self.metrics_listen, lowest=0):
            raise ConfigError(f"metrics_listen: expected HOST:PORT with a port of 0-65535, got {self.metrics_listen!r}")
        if not self.forward:
            raise ConfigError(
                "no downstream: give --forward HOST:PORT, or --findings-only with "
                "OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set"
            )
        if self.compression not in ("none", "gzip"):
            raise ConfigError(f"compression: expected none or gzip, got {self.compression!r}")
        if bool(self.client_certificate_file) != bool(self.client_key_file):
            raise ConfigError("client_certificate_file and client_key_file go together (mutual TLS needs both)")
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ConfigError("tls_cert_file and tls_key_file go together (a server certificate needs its key)")
        if self.tls_client_ca_file and not self.tls_cert_file:
            raise ConfigError("tls_client_ca_file needs tls_cert_file and tls_key_file (mutual TLS is TLS first)")
        parse_headers(self.headers)
        if self.annotate_phoenix_url is not None:
            _check_url(self.annotate_phoenix_url)
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not value >= 0:  # NaN too
                raise ConfigError(f"{f.name}: must be >= 0, got {value}")
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{f.name}: must be a finite number, got {value}")
        for name in _AT_LEAST_ONE:
            if getattr(self, name) < 1:  # 0 would refuse every request, or remember nothing
                raise ConfigError(f"{name}: must be >= 1, got {getattr(self, name)}")
        if self.memory_limit_mib < MIN_MEMORY_LIMIT_MIB:
            raise ConfigError(f"memory_limit_mib: must be >= {MIN_MEMORY_LIMIT_MIB}, got {self.memory_limit_mib}")
        if self.forward_timeout_seconds <= 0:
            raise ConfigError(f"forward_timeout_seconds: must be > 0, got {self.forward_timeout_seconds}")
        if not MIN_RECEIVE_BYTES <= self.max_receive_bytes <= MAX_RECEIVE_BYTES:
            raise ConfigError(f"max_receive_bytes: must be {MIN_RECEIVE_BYTES}-{MAX_RECEIVE_BYTES} "
                              f"(gRPC's limit is a 32-bit count), got {self.max_receive_bytes}")
        return self


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    try:
        parts.port
    except ValueError:
        parts = parts._replace(netloc="")
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(f"annotate_phoenix_url: expected Phoenix's base URL such as http://127.0.0.1:6006, got {url!r}")


_AT_LEAST_ONE = ("max_buffered_calls", "max_open_runs", "late_cache_size", "dedupe_size", "forward_consumers",
                 "max_request_spans")
MIN_MEMORY_LIMIT_MIB = 96
MIN_RECEIVE_BYTES, MAX_RECEIVE_BYTES = 64 * 1024, 2**31 - 1


# gRPC metadata: lower-case token keys, printable-ASCII values (anything else fails every call).
_HEADER_KEY = re.compile(r"[0-9a-z_.-]+")
_HEADER_VALUE = re.compile(r"[\x20-\x7e]*")


def parse_headers(text: Optional[str]) -> tuple[tuple[str, str], ...]:
    """OTLP exporter header syntax: comma-separated key=value, values URL-encoded.
    Keys become lower case (gRPC metadata). Errors name the entry, never its value."""
    out: list[tuple[str, str]] = []
    for n, entry in enumerate((text or "").split(","), start=1):
        if not entry.strip():
            continue
        key, sep, value = entry.partition("=")
        key, value = unquote(key).strip().lower(), unquote(value).strip()
        if not sep or not _HEADER_KEY.fullmatch(key):
            raise ConfigError(f"headers: entry {n} is not key=value with a key of a-z 0-9 - _ . "
                              "(the expected form is key1=value1,key2=value2)")
        if key.endswith("-bin") or key.startswith("grpc-"):
            raise ConfigError(f"headers: {key!r} is reserved by gRPC or binary; give text headers only")
        if not _HEADER_VALUE.fullmatch(value):
            raise ConfigError(f"headers: the value of {key!r} (entry {n}) must be printable ASCII once URL-decoded")
        out.append((key, value))
    return tuple(out)


def _host_port(text: str, lowest: int) -> bool:
    host, _, port = text.rpartition(":")
    return bool(host) and port.isascii() and port.isdigit() and lowest <= int(port) <= 65535


def split_host_port(text: str) -> tuple[str, int]:
    """"[::1]:9464" -> ("::1", 9464): the brackets are URL syntax, not part of the address."""
    host, _, port = text.rpartition(":")
    return host.removeprefix("[").removesuffix("]"), int(port)


def is_loopback(host: str) -> bool:
    """"127.0.0.1", "::1", "localhost": an address only this host reaches."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_ENV_PREFIX = "OTEL_LOOPGUARD_"
# OTEL_LOOPGUARD_KEY_FILE is left to load_key(), so OTEL_LOOPGUARD_KEY beats it here as in the
# processor and the audit: both ends must pick the same key, or digests silently stop comparing.
_KEY_SETTINGS = frozenset({"key_file"})
# Standard exporter settings the downstream honours when the receiver's own settings are unset.
_EXPORTER_ENV = (
    ("headers", "HEADERS"),
    ("certificate_file", "CERTIFICATE"),
    ("client_certificate_file", "CLIENT_CERTIFICATE"),
    ("client_key_file", "CLIENT_KEY"),
    ("compression", "COMPRESSION"),
)


def _coerce(name: str, raw: Any, source: str) -> Any:
    default = getattr(ReceiverConfig(), name)
    kind = type(default) if default is not None else str
    try:
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(raw)
            return text in ("true", "1", "yes")
        if isinstance(raw, bool) or (kind is str and not isinstance(raw, str)):
            raise TypeError(raw)  # `true` is no number, and 8080 no address
        if kind is int and isinstance(raw, float) and not raw.is_integer():
            raise ValueError(raw)  # 1.9 runs is not silently 1
        value = kind(raw)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(raw)
        return value
    except (TypeError, ValueError, OverflowError):
        got = "a value of another kind (not shown: it holds secrets)" if name in _SECRETS else repr(raw)
        raise ConfigError(f"{source}: {name} must be {_KINDS.get(kind, kind.__name__)}, got {got}") from None


_SECRETS = frozenset({"headers", "auth_tokens", "phoenix_api_key"})
_KINDS = {int: "an integer", float: "a finite number", str: "text", bool: "true or false"}


def from_sources(
    flags: Mapping[str, Any],
    env: Optional[Mapping[str, str]] = None,
    config_file: Optional[str] = None,
) -> ReceiverConfig:
    env = os.environ if env is None else env
    names = {f.name for f in fields(ReceiverConfig)}
    values: dict[str, Any] = {}
    if config_file:
        values.update(_file_values(Path(config_file), names))
    for name in names - _KEY_SETTINGS:
        key = _ENV_PREFIX + name.upper()
        if env.get(key):
            values[name] = _coerce(name, env[key], key)
    values.update({k: v for k, v in flags.items() if v is not None and k in names})
    if values.get("phoenix_api_key") is None and env.get("PHOENIX_API_KEY"):
        values["phoenix_api_key"] = env["PHOENIX_API_KEY"]  # the variable Phoenix's own clients read
    if flags.get("key_file") is None and (env.get(ENV_KEY) or env.get(ENV_KEY_FILE)):
        values.pop("key_file", None)  # the environment's key beats the config file's, as any setting
    if isinstance(values.get("compression"), str):
        values["compression"] = values["compression"].strip().lower()  # GZIP, as the SDK accepts it
    if not values.get("forward") and values.get("findings_only"):
        endpoint = _otlp_endpoint(env)
        if endpoint is not None:
            values["forward"], secure = endpoint
            values.setdefault("insecure", not secure)
            values.update(_exporter_env(env, values, secure=not values["insecure"]))
    return replace(ReceiverConfig(), **values).validate()


def _exporter_env(env: Mapping[str, str], values: Mapping[str, Any], secure: bool) -> dict[str, Any]:
    """The standard exporter settings that go with OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT.

    Only when that endpoint is the downstream: next to a `--forward` elsewhere they
    belong to some other exporter (often the app's own, with a vendor's API key).
    Certificates count only over TLS, as in the SDK's exporter."""
    out: dict[str, Any] = {}
    for name, suffix in _EXPORTER_ENV:
        raw = env.get(f"OTEL_EXPORTER_OTLP_TRACES_{suffix}") or env.get(f"OTEL_EXPORTER_OTLP_{suffix}")
        if not raw or values.get(name) is not None or (name.endswith("_file") and not secure):
            continue
        out[name] = raw if name == "headers" else raw.strip().lower() if name == "compression" else raw.strip()
    return out


def _file_values(path: Path, names: set[str]) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        # Position and problem only: YAML's own message quotes the line, which may hold a header's value.
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', None) or 'syntax error'}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings")
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(unknown)} (known: {', '.join(sorted(names))})")
    empty = sorted(k for k, v in data.items() if v is None and getattr(ReceiverConfig(), k) is not None)
    if empty:
        raise ConfigError(f"{path}: {', '.join(empty)} has no value (remove the line for the default)")
    return {k: _coerce(k, v, str(path)) if v is not None else None for k, v in data.items()}


def _otlp_endpoint(env: Mapping[str, str]) -> Optional[tuple[str, bool]]:
    """Findings-only default: the standard OTLP gRPC endpoint as (HOST:PORT, use TLS).

    As the OTLP exporter specification says for gRPC: `https` means TLS, `http`
    plaintext, a missing port is 4317, and a path has no meaning (so it is refused
    rather than silently dropped: `/v1/traces` suggests an OTLP/HTTP endpoint).
    """
    key = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") else "OTEL_EXPORTER_OTLP_ENDPOINT"
    url = env.get(key)
    if not url:
        return None
    parsed = urlsplit(url if "://" in url else f"http://{url}")
    try:
        port = parsed.port
    except ValueError:
        port = 0
    if port == 0:  # None: no port given, the default applies
        raise ConfigError(f"{key}: {url!r} has no valid port (1-65535)")
    if parsed.path not in ("", "/"):
        raise ConfigError(f"{key}: {url!r} has a path; the receiver sends OTLP/gRPC, give scheme://host:port")
    if not parsed.hostname:
        raise ConfigError(f"{key}: {url!r} names no host")
    secure = parsed.scheme == "https"
    insecure_env = env.get("OTEL_EXPORTER_OTLP_TRACES_INSECURE") or env.get("OTEL_EXPORTER_OTLP_INSECURE")
    if insecure_env and insecure_env.strip().lower() == "true":
        secure = False
    host = f"[{parsed.hostname}]" if ":" in parsed.hostname else parsed.hostname
    return f"{host}:{port or 4317}", secure
