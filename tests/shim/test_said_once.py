"""Nothing fails silently in the gateway (coordinator rule 15): each reason the
coordinator cannot serve is ONE WARNING on ``kexpr.shim``, once per change and not
per presentation, naming the reason in enum words and never a value; the one path
a warning names is the data root's own (operator configuration, not data), in
``worker_unavailable``.

Before, a typo in the data root, a symlinked root and an ``identity.key`` of the
wrong mode gave ``spool_unavailable`` with no log line at all, an unreadable
glossary made dual cards canonical in silence, and an unknown adaptive surface was
said only at DEBUG."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from kit.bodies import DAILY_BODY, DAILY_FACTS, present_styled
from reference_host.samples import callback_data, dual_card, session
from reference_host.scripted_worker import heartbeat

from gateway_shim import DUAL_SURFACE, KoreanExpressionCoordinator, Mode, Outcome
from kexpr.spool.layout import DataRoot
from shim.test_coordinator import ScriptedWorker, accepted, coordinator

ROUNDS = 3  # presentations per case: said once, however many


def _records(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kexpr.shim" and r.levelno == level]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return _records(caplog, logging.WARNING)


# The styled weekly's interpretation slot, as the fit table allows it (design §6.1).
STYLED = "[[P:01]]. 다만 [[A:01]]."


def _present_styled(coord: KoreanExpressionCoordinator, n: int = ROUNDS) -> list[Outcome]:
    """``n`` presentations of the styled weekly (one that would write a request), each
    its own artifact."""
    return [present_styled(coord, f"evt-{i}").outcome for i in range(n)]


@pytest.fixture(autouse=True)
def _hear_the_shim(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kexpr")


def _no_path_in(messages: list[str], *paths: Path) -> None:
    for m in messages:
        for p in paths:
            assert str(p) not in m and p.name not in m, m


def test_a_data_root_that_cannot_exist_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A typo'd path whose parent cannot hold it (here a file: refused even to root)."""
    blocker = tmp_path / "kexpr-typo"
    blocker.write_text("")
    root = blocker / "korean-expression-v1"
    coord = coordinator(root, Mode.SHADOW, weekly=True)
    try:
        assert _present_styled(coord) == [Outcome.SPOOL_UNAVAILABLE] * ROUNDS
    finally:
        coord.close()
    assert _warnings(caplog) == ["spool_unavailable reason=data_root_missing unsafe=none"]
    _no_path_in(_warnings(caplog), root)


def test_a_data_root_that_did_not_exist_is_named_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A typo'd path the gateway may create: it makes an empty root there, where
    no worker serves, and every presentation is ``worker_unavailable``. The
    warning said only ``reason=absent``, and the operator guide's remedy (match
    the worker's ``--data-root`` to the host's path) needs the host's path: the
    warning names it, once, as configured (`kexpr.spool.log.OperatorPath`)."""
    root = tmp_path / "kexpr-typo" / "korean-expression-v1"
    coord = coordinator(root, Mode.SHADOW, weekly=True)
    try:
        assert _present_styled(coord) == [Outcome.WORKER_UNAVAILABLE] * ROUNDS
    finally:
        coord.close()
    named = f"data_root={quote(str(DataRoot(root).root))}"
    assert _warnings(caplog) == [f"worker_unavailable reason=absent {named}"]
    (record,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.name == "kexpr.shim"
    assert record.kexpr_fields == {  # type: ignore[attr-defined]
        "reason": "absent",
        "data_root": quote(str(DataRoot(root).root)),
    }


def test_a_data_root_path_is_said_on_one_line_as_configured(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A path with a space, a newline or Hangul in it cannot forge or break a
    record: percent-encoded, one token, and what was configured decodes back."""
    root = tmp_path / "kexpr\nworker_serving x=1" / "데이터"
    coord = coordinator(root, Mode.SHADOW, weekly=True)
    try:
        assert _present_styled(coord, 1) == [Outcome.WORKER_UNAVAILABLE]
    finally:
        coord.close()
    (said,) = _warnings(caplog)
    assert "\n" not in said and "데이터" not in said
    event, reason, named = said.split(" ")
    assert (event, reason) == ("worker_unavailable", "reason=absent")
    assert unquote(named.removeprefix("data_root=")) == str(DataRoot(root).root)


def test_a_body_with_nothing_to_style_never_reaches_the_data_root_and_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same impossible root, a daily body (every slot locked by the fit table):
    ``nothing_to_style`` before the root is looked at, so there is nothing to say;
    the styled weekly on the same coordinator still says the root's fault."""
    blocker = tmp_path / "kexpr-typo"
    blocker.write_text("")
    root = blocker / "korean-expression-v1"
    coord = coordinator(root, Mode.SHADOW, daily=True, weekly=True)
    try:
        daily = [
            coord.present_daily(DAILY_BODY, facts=DAILY_FACTS, finalized_event_id=f"d{i}").outcome
            for i in range(ROUNDS)
        ]
        assert daily == [Outcome.NOTHING_TO_STYLE] * ROUNDS
        assert _warnings(caplog) == []
        assert _present_styled(coord) == [Outcome.SPOOL_UNAVAILABLE] * ROUNDS
    finally:
        coord.close()
    assert _warnings(caplog) == ["spool_unavailable reason=data_root_missing unsafe=none"]


def test_a_symlinked_data_root_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    real = tmp_path / "real"
    DataRoot(real).ensure()
    link = tmp_path / "korean-expression-v1"
    link.symlink_to(real)
    coord = coordinator(link, Mode.SHADOW, weekly=True)
    try:
        assert _present_styled(coord) == [Outcome.SPOOL_UNAVAILABLE] * ROUNDS
    finally:
        coord.close()
    assert _warnings(caplog) == ["spool_unavailable reason=data_root_symlink unsafe=symlink"]
    _no_path_in(_warnings(caplog), real, link)


def test_an_unsafe_data_root_is_said_once_with_its_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "korean-expression-v1"
    root.mkdir()
    os.chmod(root, 0o755)  # neither private (0700) nor the shared group's 2770
    coord = coordinator(root, Mode.SHADOW, weekly=True)
    try:
        assert _present_styled(coord) == [Outcome.SPOOL_UNAVAILABLE] * ROUNDS
    finally:
        coord.close()
    assert _warnings(caplog) == ["spool_unavailable reason=data_root_unsafe unsafe=bad_mode"]


def test_an_identity_key_of_the_wrong_mode_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = DataRoot(tmp_path / "korean-expression-v1")
    root.ensure()
    root.identity_key.write_bytes(os.urandom(32))
    os.chmod(root.identity_key, 0o644)
    coord = coordinator(root.root, Mode.SHADOW, weekly=True)
    try:
        assert _present_styled(coord) == [Outcome.SPOOL_UNAVAILABLE] * ROUNDS
    finally:
        coord.close()
    assert _warnings(caplog) == ["spool_unavailable reason=identity_key_unusable unsafe=bad_mode"]


def test_fixed_is_said_once_at_info_and_a_new_fault_is_said_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Once per change: broken (WARNING), fixed (INFO ``spool_available`` on the
    first request written), broken again (WARNING again)."""
    root = DataRoot(tmp_path / "korean-expression-v1")
    root.ensure()
    root.identity_key.write_bytes(os.urandom(32))
    os.chmod(root.identity_key, 0o644)
    coord = coordinator(root.root, Mode.SHADOW, weekly=True)
    try:
        assert _present_styled(coord) == [Outcome.SPOOL_UNAVAILABLE] * ROUNDS
        os.chmod(root.identity_key, 0o600)
        with ScriptedWorker(root, accepted(STYLED)):
            assert _present_styled(coord) == [Outcome.SHADOW_SELECTED] * ROUNDS
            assert _records(caplog, logging.INFO).count("spool_available") == 1
            os.chmod(root.requests, 0o755)
            assert _present_styled(coord) == [Outcome.SPOOL_UNAVAILABLE] * ROUNDS
    finally:
        coord.close()
    assert _warnings(caplog) == [
        "spool_unavailable reason=identity_key_unusable unsafe=bad_mode",
        "spool_unavailable reason=data_root_unsafe unsafe=bad_mode",
    ]


def test_an_unreadable_glossary_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = DataRoot(tmp_path / "korean-expression-v1")
    root.ensure()
    glossary = root.root / "operator-glossary.json"
    glossary.write_bytes(b"{not json")
    os.chmod(glossary, 0o600)
    heartbeat(root)
    coord = coordinator(root.root, Mode.SHADOW, adaptive_operator=True)
    s = session()
    try:
        outcomes = [
            coord.present_adaptive(
                dual_card(s), callback_data=callback_data(s), surface=DUAL_SURFACE
            ).outcome
            for _ in range(ROUNDS)
        ]
    finally:
        coord.close()
    assert outcomes == [Outcome.INELIGIBLE] * ROUNDS
    assert _warnings(caplog) == ["glossary_unusable problem=not_json"]


def test_an_unknown_adaptive_surface_is_a_warning_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "korean-expression-v1"
    coord = coordinator(root, Mode.SHADOW, adaptive_operator=True)
    s = session()
    try:
        outcomes = [
            coord.present_adaptive(
                dual_card(s), callback_data=callback_data(s), surface="adaptive.dualcoach.card.v1"
            ).outcome
            for _ in range(ROUNDS)
        ]
    finally:
        coord.close()
    assert outcomes == [Outcome.INELIGIBLE] * ROUNDS
    assert _warnings(caplog) == ["unknown_surface"]
    assert not any("dualcoach" in m for m in _records(caplog, logging.DEBUG) + _warnings(caplog))
