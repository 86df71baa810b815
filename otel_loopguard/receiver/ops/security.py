"""Who may talk to the receiver: server TLS, mutual TLS and bearer tokens (docs/security.md).

- TLS: the certificate chain and key from `tls_cert_file` / `tls_key_file`; with
  `tls_client_ca_file` every client must present a certificate that CA issued (mutual TLS).
  The files are checked (read, parsed, key matching certificate) before they are used, at
  startup and on reload; gRPC asks for the current ones at each new handshake, so a reload
  (SIGHUP, or a changed file: reload.py) swaps them without dropping the server or its open
  connections.
- Tokens: `authorization: Bearer <token>` on each request (gRPC metadata, or the HTTP
  header on /metrics), from `auth_token_file` (one a line) and `OTEL_LOOPGUARD_AUTH_TOKENS`
  (comma-separated); several at once, for rotation. Compared in constant time; a token is
  never logged or echoed, and errors name a file's line, never its text.

The check is one per request (when gRPC looks the method up), not one per span. The gRPC health
service needs no token: probes (kubelet's among them) cannot send one, and it tells only
whether the receiver is serving.
"""

from __future__ import annotations

import hmac
import logging
import re
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import grpc

from ..config import ConfigError, ReceiverConfig
from .metrics import Metrics

_log = logging.getLogger("otel_loopguard.receiver")

LOG_EVERY_SECONDS = 60.0
UNAUTHENTICATED_MESSAGE = "missing or invalid bearer token (send metadata authorization: Bearer <token>)"
MIN_TOKEN_CHARS, MAX_TOKEN_CHARS = 16, 4096
# Printable ASCII but space, comma (the variable's separator), quotes and backslash: what fits
# in an `authorization: Bearer` value and in a file line without quoting.
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/=!#$%&'*^`|:;<>?@\[\]{}()]+")


# -- tokens --------------------------------------------------------------------------------
def load_tokens(config: ReceiverConfig) -> tuple[bytes, ...]:
    """Every accepted token, from the file and the setting; () when auth is off."""
    tokens: list[bytes] = []
    if config.auth_tokens is not None:
        for n, raw in enumerate(config.auth_tokens.split(","), start=1):
            if raw.strip():
                tokens.append(_token(raw.strip(), f"auth_tokens: entry {n}"))
        if not tokens:  # set but empty must not mean "no auth"
            raise ConfigError("auth_tokens: no token given (comma-separated tokens)")
    if config.auth_token_file:
        text = _read(config.auth_token_file, "auth_token_file").decode("utf-8", errors="replace")
        found = 0
        for n, line in enumerate(text.splitlines(), start=1):
            line = line.strip()
            if line and not line.startswith("#"):
                tokens.append(_token(line, f"auth_token_file: line {n} of {config.auth_token_file}"))
                found += 1
        if not found:  # an empty file would otherwise turn auth off without a word
            raise ConfigError(f"auth_token_file: {config.auth_token_file} holds no token (one a line; # comments)")
    return tuple(tokens)


def _token(text: str, where: str) -> bytes:
    if not MIN_TOKEN_CHARS <= len(text) <= MAX_TOKEN_CHARS or not _TOKEN.fullmatch(text):
        raise ConfigError(f"{where}: a token must be {MIN_TOKEN_CHARS}-{MAX_TOKEN_CHARS} characters of "
                          "A-Z a-z 0-9 and punctuation, without spaces or commas (the token is not shown)")
    return text.encode("ascii")


class Tokens:
    """The accepted tokens, swapped whole on reload."""

    def __init__(self, tokens: tuple[bytes, ...]):
        self._tokens = tokens

    @property
    def enabled(self) -> bool:
        return bool(self._tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    def replace(self, tokens: tuple[bytes, ...]) -> None:
        self._tokens = tokens

    def accepts(self, authorization: Optional[str | bytes]) -> bool:
        """`Bearer <token>` with one of the tokens. Every token is compared, always, so the time
        taken says nothing about which one came closest."""
        if authorization is None:
            return False
        value = authorization.encode("latin-1", errors="replace") if isinstance(authorization, str) else authorization
        scheme, _, presented = value.strip().partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        presented = presented.strip()
        ok = False
        for token in self._tokens:
            ok |= hmac.compare_digest(presented, token)
        return ok


class BearerAuth(grpc.GenericRpcHandler):
    """The receiver's methods behind a token check: UNAUTHENTICATED for a request without a
    valid token, before its handler (or the decoder) sees a byte of it.

    A wrapper of the service's generic handler rather than a server interceptor: gRPC already
    calls `service()` once per request to find the method, synchronously, where an aio
    interceptor adds a coroutine to every request. Methods it does not
    serve, the health service among them, fall through to their own handlers untouched."""

    def __init__(self, inner: grpc.GenericRpcHandler, tokens: Tokens, metrics: Metrics):
        self._inner = inner
        self._tokens = tokens
        self._metrics = metrics
        # Request-streaming, so the refusal never reads the request: a stranger's 64 MiB body is
        # not received, let alone decoded (unary and streaming calls are framed alike on the wire).
        self._refuse = grpc.stream_unary_rpc_method_handler(self._unauthenticated)
        self._next_log = 0.0
        self._unlogged = 0

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Optional[grpc.RpcMethodHandler]:
        handler = self._inner.service(handler_call_details)
        if handler is None:
            return None
        for key, value in handler_call_details.invocation_metadata or ():
            if key == "authorization":
                return handler if self._tokens.accepts(value) else self._refuse
        return self._refuse

    async def _unauthenticated(self, requests: Any, context: grpc.aio.ServicerContext) -> None:
        self._metrics.inc("unauthenticated_total")
        now = time.monotonic()
        if now >= self._next_log:  # a line a minute at most: a stranger must not flood the log
            self._next_log = now + LOG_EVERY_SECONDS
            more = f" (and {self._unlogged} more since the last such line)" if self._unlogged else ""
            # The peer's address only: what it sent may be a real token of some other system.
            _log.warning("refused a request without a valid bearer token from %s%s", context.peer(), more)
            self._unlogged = 0
        else:
            self._unlogged += 1
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)


# -- TLS -----------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class ServerCertificates:
    """PEM bytes for gRPC and an ssl context for /metrics, checked: the key matches the chain,
    the CA bundle parses."""

    chain: bytes
    key: bytes
    client_ca: Optional[bytes]
    context: ssl.SSLContext

    def __repr__(self) -> str:  # holds a private key: never shown
        return f"ServerCertificates(mutual={self.client_ca is not None})"


def load_certificates(config: ReceiverConfig) -> Optional[ServerCertificates]:
    """The listen side's certificates; None when TLS is off. Errors name the setting."""
    if not config.tls_cert_file:
        return None
    assert config.tls_key_file  # validate() pairs them
    chain = _read(config.tls_cert_file, "tls_cert_file")
    key = _read(config.tls_key_file, "tls_key_file")
    client_ca = _read(config.tls_client_ca_file, "tls_client_ca_file") if config.tls_client_ca_file else None
    for setting, data in (("tls_cert_file", chain), ("tls_key_file", key), ("tls_client_ca_file", client_ca)):
        if data is not None and b"-----BEGIN" not in data:  # contents never echoed: may be a key
            raise ConfigError(f"{setting}: {getattr(config, setting)} is not a PEM file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config.tls_cert_file, config.tls_key_file)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"tls_cert_file / tls_key_file: {config.tls_cert_file} and {config.tls_key_file} are not a "
                          f"certificate chain and its private key ({_reason(exc)})") from None
    if client_ca is not None:
        try:
            context.load_verify_locations(cadata=client_ca.decode("ascii", errors="replace"))
        except (ssl.SSLError, ValueError) as exc:
            raise ConfigError(f"tls_client_ca_file: {config.tls_client_ca_file} holds no usable CA certificate "
                              f"({_reason(exc)})") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return ServerCertificates(chain=chain, key=key, client_ca=client_ca, context=context)


def _reason(exc: Exception) -> str:
    return getattr(exc, "reason", None) or type(exc).__name__


def _read(path: str, setting: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{setting}: cannot read {path}: {exc.strerror or exc}") from None


class CertificateStore:
    """The certificates in use. gRPC's fetcher gets the new ones once after a reload (else
    None: "keep what you have"); the metrics endpoint's handshakes switch to the new context."""

    def __init__(self, certificates: ServerCertificates):
        self.current = certificates
        self._pending: Optional[ServerCertificates] = None
        self._mutual = certificates.client_ca is not None

    def replace(self, certificates: ServerCertificates) -> None:
        if (certificates.client_ca is not None) != self._mutual:
            # gRPC fixes "client certificates required" when the port is bound.
            raise ConfigError("tls_client_ca_file: mutual TLS cannot be turned on or off by a reload; restart")
        self.current = self._pending = certificates

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            _configuration(self.current), self._fetch, require_client_authentication=self._mutual
        )

    def _fetch(self) -> Optional[grpc.ServerCertificateConfiguration]:
        # Called by gRPC at each new handshake, from its own thread: one read, one write.
        pending, self._pending = self._pending, None
        return _configuration(pending) if pending is not None else None

    def ssl_context(self) -> ssl.SSLContext:
        """The metrics endpoint's context: each handshake is handed the current certificates.
        (The callback runs for every ClientHello, with or without a server name.)"""
        first = self.current.context

        def current(connection: Any, server_name: Optional[str], context: ssl.SSLContext) -> None:
            if self.current.context is not first:
                connection.context = self.current.context

        first.sni_callback = current
        return first


def _configuration(c: ServerCertificates) -> grpc.ServerCertificateConfiguration:
    return grpc.ssl_server_certificate_configuration([(c.key, c.chain)], root_certificates=c.client_ca)
