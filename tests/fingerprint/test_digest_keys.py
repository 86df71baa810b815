"""The digest key: loading, key ids, and never revealing the secret."""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import logging
import pickle
import re
import traceback
from pathlib import Path
from typing import Any, Callable

import pytest

from otel_loopguard.errors import KeyConfigError, LoopguardError
from otel_loopguard.canon import DigestKey, ephemeral_key, load_key
from otel_loopguard.canon import keys as keys_module

SECRET = "s3cr3t-Key-Material-0123456789abcdef"
SECRET_BYTES = SECRET.encode()
MSG = b"loopguard test message"


def expected_digest(secret: bytes, message: bytes = MSG) -> str:
    return hmac.new(secret, message, hashlib.sha256).digest()[:16].hex()


@pytest.fixture
def fresh_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend no ephemeral key was made yet in this process."""
    monkeypatch.setattr(keys_module, "_warned_ephemeral", False)


@pytest.fixture
def caplog_all(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


def _leaks(secret_forms: list[str], *texts: str) -> list[str]:
    return [form for form in secret_forms for t in texts if form and form in t]


def _secret_forms(secret: bytes) -> list[str]:
    forms = [secret.hex(), base64.b64encode(secret).decode()]
    try:
        forms.append(secret.decode("utf-8"))
    except UnicodeDecodeError:
        pass
    return forms


# --- the digest itself ----------------------------------------------------------


def test_digest_is_truncated_hmac_sha256_in_lowercase_hex() -> None:
    key = DigestKey(SECRET_BYTES)
    d = key.digest(MSG)
    assert re.fullmatch(r"[0-9a-f]{32}", d)
    assert d == expected_digest(SECRET_BYTES)


# --- loading from the environment -------------------------------------------------


def test_plain_key_is_its_utf8_bytes() -> None:
    key = load_key({"OTEL_LOOPGUARD_KEY": SECRET})
    assert key.digest(MSG) == expected_digest(SECRET_BYTES)
    assert key.ephemeral is False


def test_surrounding_whitespace_is_not_part_of_the_key() -> None:
    assert load_key({"OTEL_LOOPGUARD_KEY": f"  {SECRET}\n"}).digest(MSG) == expected_digest(SECRET_BYTES)


def test_hex_prefix() -> None:
    raw = bytes(range(32))
    key = load_key({"OTEL_LOOPGUARD_KEY": "hex:" + raw.hex()})
    assert key.digest(MSG) == expected_digest(raw)


def test_base64_prefix() -> None:
    raw = bytes(range(100, 132))
    key = load_key({"OTEL_LOOPGUARD_KEY": "base64:" + base64.b64encode(raw).decode()})
    assert key.digest(MSG) == expected_digest(raw)


def test_key_file(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text(SECRET + "\n", encoding="utf-8")
    key = load_key({"OTEL_LOOPGUARD_KEY_FILE": str(path)})
    assert key.digest(MSG) == expected_digest(SECRET_BYTES)
    assert key.key_id == load_key({"OTEL_LOOPGUARD_KEY": SECRET}).key_id


def test_key_file_with_hex_prefix(tmp_path: Path) -> None:
    raw = bytes(range(40))
    path = tmp_path / "key.hex"
    path.write_text("hex:" + raw.hex() + "\n", encoding="utf-8")
    assert load_key({"OTEL_LOOPGUARD_KEY_FILE": str(path)}).digest(MSG) == expected_digest(raw)


def test_key_id_from_environment_is_used() -> None:
    key = load_key({"OTEL_LOOPGUARD_KEY": SECRET, "OTEL_LOOPGUARD_KEY_ID": "prod-2024-06"})
    assert key.key_id == "prod-2024-06"
    assert key.digest(MSG) == expected_digest(SECRET_BYTES)


def test_explicit_arguments_win_over_the_environment(tmp_path: Path) -> None:
    env = {"OTEL_LOOPGUARD_KEY": "environment-key-0123456789"}
    assert load_key(env, key=SECRET_BYTES).digest(MSG) == expected_digest(SECRET_BYTES)
    assert load_key(env, key=SECRET).digest(MSG) == expected_digest(SECRET_BYTES)
    path = tmp_path / "k"
    path.write_text(SECRET)
    assert load_key(env, key_file=path).digest(MSG) == expected_digest(SECRET_BYTES)
    assert load_key(env, key=SECRET, key_id="given").key_id == "given"


def test_env_key_is_preferred_to_env_key_file(tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_text("file-key-0123456789abcdef")
    key = load_key({"OTEL_LOOPGUARD_KEY": SECRET, "OTEL_LOOPGUARD_KEY_FILE": str(path)})
    assert key.digest(MSG) == expected_digest(SECRET_BYTES)


def test_environment_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", SECRET)
    monkeypatch.delenv("OTEL_LOOPGUARD_KEY_FILE", raising=False)
    monkeypatch.delenv("OTEL_LOOPGUARD_KEY_ID", raising=False)
    assert load_key().digest(MSG) == expected_digest(SECRET_BYTES)


# --- errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["short", "hex:" + bytes(8).hex(), "base64:" + base64.b64encode(b"fifteen bytes!!").decode(), "   "],
)
def test_too_short_key_is_an_error(value: str) -> None:
    with pytest.raises(KeyConfigError, match="too short"):
        load_key({"OTEL_LOOPGUARD_KEY": value})


def test_direct_construction_rejects_short_keys() -> None:
    with pytest.raises(KeyConfigError, match="at least 16"):
        DigestKey(b"x" * 15)
    assert DigestKey(b"x" * 16).key_id


def test_key_errors_are_loopguard_errors() -> None:
    assert issubclass(KeyConfigError, LoopguardError)


def test_missing_key_file_is_an_error_naming_the_setting_not_the_value(tmp_path: Path) -> None:
    # The value is not echoed: it may be a key pasted into the path setting by mistake.
    path = tmp_path / "no-such-key"
    with pytest.raises(KeyConfigError) as info:
        load_key({"OTEL_LOOPGUARD_KEY_FILE": str(path)})
    assert str(info.value) == ("no key file at the path given by OTEL_LOOPGUARD_KEY_FILE / --key-file "
                               "(not shown: it may be the key itself)")
    assert str(path) not in str(info.value)


def test_directory_as_key_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(KeyConfigError, match="cannot read key file"):
        load_key({"OTEL_LOOPGUARD_KEY_FILE": str(tmp_path)})


def test_non_utf8_key_file_is_an_error_without_its_content(tmp_path: Path) -> None:
    raw = b"\xff\xfe" + SECRET_BYTES
    path = tmp_path / "binary.key"
    path.write_bytes(raw)
    with pytest.raises(KeyConfigError) as info:
        load_key({"OTEL_LOOPGUARD_KEY_FILE": str(path)})
    rendered = "".join(traceback.format_exception(info.value))
    assert str(path) in str(info.value)
    assert not _leaks(_secret_forms(SECRET_BYTES) + [raw.hex()], str(info.value), repr(info.value), rendered)


@pytest.mark.parametrize(
    "value, kind",
    [
        ("base64:" + SECRET + "!!", "base64"),
        ("base64:c2VjcmV0LXZhbHVlLXh5eg=", "base64"),
        ("hex:" + SECRET, "hex"),
        ("hex:abc", "hex"),
    ],
)
def test_badly_encoded_key_error_names_the_encoding_but_not_the_key(
    value: str, kind: str, caplog_all: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(KeyConfigError) as info:
        load_key({"OTEL_LOOPGUARD_KEY": value})
    message = str(info.value)
    assert kind in message
    assert "OTEL_LOOPGUARD_KEY" in message
    body = value.split(":", 1)[1]
    rendered = "".join(traceback.format_exception(info.value))
    for text in (message, repr(info.value), rendered, caplog_all.text):
        assert body not in text
        assert SECRET not in text


def test_bad_key_in_a_file_is_named_by_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.key"
    path.write_text("base64:" + SECRET + "!!")
    with pytest.raises(KeyConfigError) as info:
        load_key({"OTEL_LOOPGUARD_KEY_FILE": str(path)})
    assert str(path) in str(info.value)
    assert SECRET not in str(info.value)


# --- the secret never shows ---------------------------------------------------------


def test_repr_and_str_show_only_the_id() -> None:
    key = load_key({"OTEL_LOOPGUARD_KEY": SECRET, "OTEL_LOOPGUARD_KEY_ID": "kid-1"})
    for shown in (repr(key), str(key), f"{key}", "%s" % key, "%r" % (key,), repr([key]), repr({"k": key})):
        assert "kid-1" in shown
        assert not _leaks(_secret_forms(SECRET_BYTES), shown)


def test_key_has_no_instance_dict_to_dump() -> None:
    key = DigestKey(SECRET_BYTES)
    assert not hasattr(key, "__dict__")


def test_nothing_logged_while_loading_contains_the_key(
    tmp_path: Path, caplog_all: pytest.LogCaptureFixture, fresh_warning: None
) -> None:
    raw = bytes(range(200, 232))
    path = tmp_path / "key"
    path.write_text(SECRET)
    attempts: list[Callable[[], Any]] = [
        lambda: load_key({"OTEL_LOOPGUARD_KEY": SECRET}),
        lambda: load_key({"OTEL_LOOPGUARD_KEY": "hex:" + raw.hex()}),
        lambda: load_key({"OTEL_LOOPGUARD_KEY": "base64:" + base64.b64encode(raw).decode()}),
        lambda: load_key({"OTEL_LOOPGUARD_KEY_FILE": str(path)}),
        lambda: load_key({"OTEL_LOOPGUARD_KEY": "base64:" + SECRET + "!!"}),
        lambda: load_key({"OTEL_LOOPGUARD_KEY": SECRET[:10]}),
        lambda: load_key({}),
    ]
    for attempt in attempts:
        try:
            made = attempt()
            made.digest(MSG)
        except KeyConfigError:
            pass
    eph = load_key({})
    forms = _secret_forms(SECRET_BYTES) + _secret_forms(raw) + [SECRET[:10]] + _secret_forms(eph._secret)
    for record in caplog_all.records:
        text = record.getMessage() + repr(record.args) + str(record.exc_text or "")
        assert not _leaks(forms, text), record
    assert not _leaks(forms, caplog_all.text)


# --- ephemeral keys --------------------------------------------------------------------


def test_no_configuration_gives_an_ephemeral_key(fresh_warning: None, caplog_all: pytest.LogCaptureFixture) -> None:
    key = load_key({})
    assert key.ephemeral is True
    assert key.key_id.startswith("ephemeral-")
    assert re.fullmatch(r"ephemeral-[0-9a-f]{8}", key.key_id)
    assert len(key._secret) == 32  # as strong as a configured key: the digest's own size
    assert re.fullmatch(r"[0-9a-f]{32}", key.digest(MSG))


def test_empty_environment_values_mean_not_configured(fresh_warning: None) -> None:
    key = load_key({"OTEL_LOOPGUARD_KEY": "", "OTEL_LOOPGUARD_KEY_FILE": ""})
    assert key.ephemeral is True


def test_ephemeral_key_warns_exactly_once_per_process(
    fresh_warning: None, caplog_all: pytest.LogCaptureFixture
) -> None:
    keys = [load_key({}), ephemeral_key(), load_key({}), ephemeral_key()]
    warnings = [r for r in caplog_all.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].getMessage() == (
        "no digest key configured (OTEL_LOOPGUARD_KEY or OTEL_LOOPGUARD_KEY_FILE): using a random "
        "per-process key; digests compare only within this process"
    )
    assert warnings[0].name == keys_module.__name__
    # every ephemeral key is its own random key with its own id
    assert len({k.key_id for k in keys}) == len(keys)
    assert len({k.digest(MSG) for k in keys}) == len(keys)
    for k in keys:
        assert not _leaks(_secret_forms(k._secret), caplog_all.text)


def test_ephemeral_key_does_not_warn_again_after_the_first_time(
    monkeypatch: pytest.MonkeyPatch, caplog_all: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(keys_module, "_warned_ephemeral", True)
    ephemeral_key()
    assert not [r for r in caplog_all.records if r.levelno >= logging.WARNING]


def test_configured_key_does_not_warn(fresh_warning: None, caplog_all: pytest.LogCaptureFixture) -> None:
    load_key({"OTEL_LOOPGUARD_KEY": SECRET})
    assert not [r for r in caplog_all.records if r.levelno >= logging.WARNING]


# --- key ids ------------------------------------------------------------------------------


def test_derived_key_id_is_stable_and_distinct() -> None:
    a1 = DigestKey(SECRET_BYTES)
    a2 = load_key({"OTEL_LOOPGUARD_KEY": SECRET})
    b = DigestKey(SECRET_BYTES + b"!")
    assert a1.key_id == a2.key_id
    assert a1.key_id != b.key_id
    assert re.fullmatch(r"hmac-[0-9a-f]{12}", a1.key_id)
    assert not _leaks(_secret_forms(SECRET_BYTES), a1.key_id)
    # the id is not a prefix of a digest any caller could compute without the key
    assert a1.key_id[5:] not in hashlib.sha256(SECRET_BYTES).hexdigest()


def test_explicit_key_id_is_kept_and_does_not_change_digests() -> None:
    a = DigestKey(SECRET_BYTES, "one")
    b = DigestKey(SECRET_BYTES, "two")
    assert (a.key_id, b.key_id) == ("one", "two")
    assert a.digest(MSG) == b.digest(MSG)


# --- the key cannot be copied out ----------------------------------------------------------


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_digest_key_cannot_be_pickled(protocol: int) -> None:
    with pytest.raises(TypeError, match="^DigestKey cannot be pickled$"):
        pickle.dumps(DigestKey(SECRET_BYTES), protocol=protocol)


def test_digest_key_cannot_be_deep_copied() -> None:
    with pytest.raises(TypeError):
        copy.deepcopy(DigestKey(SECRET_BYTES))


def test_a_key_pasted_into_the_key_file_setting_is_not_echoed(tmp_path, monkeypatch) -> None:
    from otel_loopguard.errors import KeyConfigError
    from otel_loopguard.canon import load_key

    secret = "hex:8f1c0a9b7d6e5f4a3b2c1d0e9f8a7b6c"
    with pytest.raises(KeyConfigError) as caught:
        load_key({"OTEL_LOOPGUARD_KEY_FILE": secret})
    assert "8f1c0a9b" not in str(caught.value)


@pytest.mark.parametrize("pasted", [
    "Zq9-secret-passphrase-" + "k" * 300,  # longer than a file name may be: the OS error would name it
    "s3cr3t-passphrase\x00value",  # a NUL: pathlib raises ValueError
    "abc/" + "s3cr3t" * 50,
])
def test_a_long_or_odd_key_pasted_into_the_key_file_setting_is_not_echoed_even_in_the_traceback(pasted: str) -> None:
    with pytest.raises(KeyConfigError) as caught:
        load_key({"OTEL_LOOPGUARD_KEY_FILE": pasted})
    rendered = "".join(traceback.format_exception(caught.value))
    assert "s3cr3t" not in rendered and "passphrase" not in rendered
    assert "OTEL_LOOPGUARD_KEY_FILE" in str(caught.value)
