"""`kexpr audit`: credential isolation, permissions, journal chain, redaction scan.

Every check runs against real processes and a real data root; every output is
searched for the secret values and customer strings planted on the way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakeapi import FakeOpenAI, compose_reply, default_style
from ops_support import CLEAN_ENV, NOGROUP, kexpr, start_supervisor, wait_for

from gateway_shim import (
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    WeeklyInterpretation,
    WeeklyJudgment,
    exact_block,
    format_weekly,
)
from kexpr.ops.audit import display_path, parse_env_file
from kexpr.spool.layout import DataRoot

WORKER_KEY = "sk-worker-only-3f9a1c7e5b"
OTHER_KEY = "sk-envfile-7d2e4b6a8c"
CUSTOMER = ("김민지", "72.4kg")


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        p.kill()
        p.wait()
        if p.stdout is not None:
            p.stdout.close()


def spawn(
    procs: list[subprocess.Popen[bytes]],
    env: dict[str, str],
    code: str = "",
    *,
    group: int | None = None,
) -> int:
    """A stand-in process with exactly ``env`` at execve."""
    argv = [sys.executable, "-c", code + "\nimport time\nprint('up', flush=True)\ntime.sleep(60)"]
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, group=group)
    procs.append(p)
    assert p.stdout is not None and p.stdout.readline() == b"up\n"
    return p.pid


def assert_no_secrets(text: str) -> None:
    for needle in (WORKER_KEY, OTHER_KEY, *CUSTOMER):
        assert needle not in text


def audit(*args: object) -> tuple[int, dict[str, object], str]:
    human = kexpr("audit", *map(str, args))
    js = kexpr("audit", *map(str, args), "--json")
    assert human.returncode == js.returncode
    assert_no_secrets(human.stdout + human.stderr + js.stdout + js.stderr)
    return js.returncode, json.loads(js.stdout), human.stdout


def check_of(report: dict[str, object], name: str) -> dict[str, Any]:
    checks = report["checks"]
    assert isinstance(checks, list)
    found: dict[str, Any] = next(c for c in checks if c["check"] == name)
    return found


def findings(report: dict[str, object]) -> list[tuple[str, str, str]]:
    checks = report["checks"]
    assert isinstance(checks, list)
    return [(c["check"], f["finding"], f["detail"]) for c in checks for f in c["findings"]]


# ------------------------------------------------------------------ gateways


def test_audit_catches_a_key_in_a_gateway_environment_and_passes_a_clean_one(
    procs: list[subprocess.Popen[bytes]],
) -> None:
    dirty = spawn(procs, {**CLEAN_ENV, "OPENAI_API_KEY": WORKER_KEY})
    clean = spawn(procs, dict(CLEAN_ENV))
    code, report, human = audit("--gateway-pid", dirty)
    assert code == 1
    assert findings(report) == [("gateway_environment", "gateway_key_present", "OPENAI_API_KEY")]
    assert "FINDING gateway_key_present" in human
    code, report, human = audit("--gateway-pid", clean)
    assert code == 0 and report["verdict"] == "clean" and "verdict: clean" in human


def test_deleting_the_key_after_start_does_not_hide_it(
    procs: list[subprocess.Popen[bytes]],
) -> None:
    """/proc/PID/environ is the environment at execve (design §10)."""
    pid = spawn(
        procs,
        {**CLEAN_ENV, "OPENAI_API_KEY": WORKER_KEY},
        "import os\ndel os.environ['OPENAI_API_KEY']",
    )
    code, report, _ = audit("--gateway-pid", pid)
    assert code == 1 and findings(report)[0][1] == "gateway_key_present"


def test_other_openai_secrets_and_copied_key_values_are_found(
    procs: list[subprocess.Popen[bytes]],
) -> None:
    gw = spawn(
        procs,
        {
            **CLEAN_ENV,
            "OPENAI_ADMIN_KEY": "sk-admin-xxxxxxxxxxxx",
            "OPENAI_CUSTOM_HEADERS": "Authorization: Bearer x",
            "OPENAI_BASE_URL": "https://example.invalid/v1",  # not a secret: no finding
            "COPIED": OTHER_KEY,
        },
    )
    env_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"kexpr-audit-{os.getpid()}.env"
    env_file.write_text(f"OPENAI_API_KEY={OTHER_KEY}\n")
    try:
        code, report, _ = audit("--gateway-pid", gw, "--env-file", env_file)
    finally:
        env_file.unlink()
    assert code == 1
    assert set(findings(report)) == {
        ("gateway_environment", "gateway_openai_secret", "OPENAI_ADMIN_KEY"),
        ("gateway_environment", "gateway_openai_secret", "OPENAI_CUSTOM_HEADERS"),
        ("gateway_environment", "gateway_key_value_present", "COPIED"),
        ("env_file", "env_file_key_present", "OPENAI_API_KEY (line 1)"),
    }


def test_missing_processes_are_unusable_not_clean() -> None:
    code, report, human = audit("--gateway-pid", 2**22 + 12345)
    assert code == 2 and report["verdict"] == "unusable" and "UNUSABLE no_such_process" in human


# ------------------------------------------------------------------ env files


def test_env_files(tmp_path: Path) -> None:
    hermes = tmp_path / "hermes.env"
    hermes.write_text(
        "# host secrets\n"
        "TELEGRAM_BOT_TOKEN=123:abc\n"
        f"export OPENAI_API_KEY='{WORKER_KEY}'   \n"
        f'MOONSHOT_API_KEY="{OTHER_KEY}"\n'
    )
    clean = tmp_path / "clean.env"
    clean.write_text("TELEGRAM_BOT_TOKEN=123:abc\nMOONSHOT_API_KEY=sk-moonshot-not-openai\n")
    code, report, human = audit("--env-file", hermes, "--env-file", clean)
    assert code == 1
    assert findings(report) == [("env_file", "env_file_key_present", "OPENAI_API_KEY (line 3)")]
    assert "123:abc" not in human
    assert audit("--env-file", clean)[0] == 0
    assert audit("--env-file", tmp_path / "missing.env")[0] == 2


def test_env_file_parser() -> None:
    text = "A=1\nexport B = '2 # x'\nC=3 # comment\n#D=4\nnot a line\nE=\"5\"\n"
    assert parse_env_file(text) == [(1, "A", "1"), (2, "B", "2 # x"), (3, "C", "3"), (6, "E", "5")]


def test_env_file_parser_reads_what_python_dotenv_gives_the_host() -> None:
    # Multi-line, escaped and interpolated values, and a repeated name (the last wins).
    text = 'M="sk-multi\nline"\nQ="a\\"b"\nI=${Q}c\nR=1\nR=2\n'
    assert parse_env_file(text) == [
        (1, "M", "sk-multi\nline"),
        (3, "Q", 'a"b'),
        (4, "I", 'a"bc'),
        (6, "R", "2"),
    ]


def test_env_file_key_hidden_in_a_multiline_or_interpolated_value_is_found(tmp_path: Path) -> None:
    env = tmp_path / "host.env"
    env.write_text(
        f'NOTE="first\nsecond"\nOPENAI_API_KEY="{OTHER_KEY}"\nCOPY=${{OPENAI_API_KEY}}\n'
    )
    code, report, _ = audit("--env-file", env)
    assert code == 1
    assert findings(report) == [
        ("env_file", "env_file_key_present", "OPENAI_API_KEY (line 3)"),
        ("env_file", "env_file_key_value_present", "COPY (line 4)"),
    ]


# ------------------------------------------------------------------ the worker


AS_ROOT = os.geteuid() == 0
# As root, stand-in processes run under a non-root group: a uid 0 + gid 0 process's
# dumpability cannot be read (proc(5)). Another user's processes already differ.
GROUP = NOGROUP if AS_ROOT else None


@pytest.mark.skipif(
    not AS_ROOT,
    reason="the worker check reads a non-dumpable process's environment: root only (CAP_SYS_PTRACE); the non-root counterpart is test_a_supervised_worker_is_closed_to_an_audit_by_its_own_user",
)
def test_a_supervised_worker_passes_the_worker_check(
    data_root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    sup = start_supervisor(data_root, key=WORKER_KEY, group=NOGROUP)
    try:
        gw_copy = spawn(procs, {**CLEAN_ENV, "SOME_NAME": WORKER_KEY})
        gw_clean = spawn(procs, dict(CLEAN_ENV))
        code, report, _ = audit(
            "--worker-pid",
            sup.worker_pid(),
            "--gateway-pid",
            gw_clean,
            "--gateway-pid",
            gw_copy,
            "--data-root",
            data_root,
        )
    finally:
        sup.stop()
    # The worker's own key, found under another name in a gateway: compared, never printed.
    assert findings(report) == [("gateway_environment", "gateway_key_value_present", "SOME_NAME")]
    assert code == 1
    worker = check_of(report, "worker_process")
    assert worker["status"] == "clean"
    assert worker["info"]["environ_protected"] is True and worker["info"]["credential"] == "present"


@pytest.mark.skipif(
    AS_ROOT,
    reason="root reads every environment; as root the full worker check runs (test_a_supervised_worker_passes_the_worker_check)",
)
def test_a_supervised_worker_is_closed_to_an_audit_by_its_own_user(data_root: Path) -> None:
    """Not root: the worker runs as the auditor's own user and still its
    environment cannot be read — the audit says it is protected, and unusable
    (it cannot vouch for variables it cannot read), never clean."""
    sup = start_supervisor(data_root, key=WORKER_KEY)
    try:
        code, report, human = audit("--worker-pid", sup.worker_pid())
    finally:
        sup.stop()
    assert code == 2 and "UNUSABLE process_unreadable" in human
    worker = check_of(report, "worker_process")
    assert worker["info"]["environ_protected"] is True and worker["findings"] == []


def test_a_dumpable_or_hazardous_worker_is_a_finding(procs: list[subprocess.Popen[bytes]]) -> None:
    dumpable = spawn(procs, dict(CLEAN_ENV), group=GROUP)
    code, report, _ = audit("--worker-pid", dumpable)
    assert code == 1 and findings(report) == [("worker_process", "worker_dumpable", "")]
    hazards = [
        ("worker_process", "worker_injection_variable", "LD_PRELOAD"),
        ("worker_process", "worker_hazardous_variable", "OPENAI_ORG_ID"),
        ("worker_process", "worker_hazardous_variable", "SSLKEYLOGFILE"),
    ]
    env = {
        **CLEAN_ENV,
        "OPENAI_API_KEY": WORKER_KEY,
        "OPENAI_ORG_ID": "org-x",
        "SSLKEYLOGFILE": "/tmp/k",
        "LD_PRELOAD": "/x.so",
    }
    if AS_ROOT:
        undumpable = "import ctypes\nctypes.CDLL(None).prctl(4, 0, 0, 0, 0)"
        code, report, _ = audit("--worker-pid", spawn(procs, env, undumpable, group=GROUP))
        assert code == 1 and findings(report) == hazards
    # Any user: a dumpable process's own-user environment is read, every hazard named.
    code, report, _ = audit("--worker-pid", spawn(procs, env, group=GROUP))
    assert code == 1 and findings(report) == [("worker_process", "worker_dumpable", ""), *hazards]


def test_a_worker_running_as_root_root_cannot_be_vouched_for(
    procs: list[subprocess.Popen[bytes]],
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs a uid 0 + gid 0 process to audit")
    pid = spawn(procs, dict(CLEAN_ENV), "import ctypes\nctypes.CDLL(None).prctl(4, 0, 0, 0, 0)")
    code, _, human = audit("--worker-pid", pid)
    assert code == 2 and "UNUSABLE dumpable_undetermined" in human


# ------------------------------------------------------------------ data root

# The goal-missing weekly report (branch I2), the one message the fit table styles
# (a presentation of it makes a call), carrying the customer's name and weight.
BODY = format_weekly(
    recent="72.4kg",
    prior="72.1kg",
    change="+0.42%",
    rate="85.71%",
    goal_range="기록 없음",
    interpretation=WeeklyInterpretation.GOAL_MISSING,
    judgment=WeeklyJudgment.RECORDS,
    actions=("김민지 님 스쿼트 5세트 기록을 보완합니다.",),
)


@pytest.fixture
def used_root(data_root: Path, fake_api: FakeOpenAI) -> Path:
    """A data root after real traffic: one shadow presentation through the worker."""
    return _traffic(data_root, fake_api)


def _traffic(data_root: Path, fake_api: FakeOpenAI) -> Path:
    fake_api.behaviour = compose_reply(default_style)
    sup = start_supervisor(data_root, fake=fake_api)
    coord = KoreanExpressionCoordinator(
        KoreanExpressionConfig.from_block(exact_block(Mode.SHADOW, weekly=True)), data_root
    )
    try:
        cand = coord.present_weekly(
            BODY,
            explicit_fields=(),
            schedule_key="evt-audit-1",
            kind="weekly_report",
            kst_day="2025-11-30",
        )
        # The traffic this fixture stands for happened (a clear failure otherwise, not a
        # StopIteration from an empty outcomes/ below).
        assert cand.outcome is Outcome.SHADOW_SELECTED, cand.outcome
        assert wait_for(
            lambda: any(
                b"shadow_selected" in p.read_bytes()
                for p in (data_root / "outcomes").glob("*.jsonl")
            )
        )
    finally:
        coord.close()
        sup.stop()
    return data_root


def test_data_root_after_real_traffic_is_clean(used_root: Path) -> None:
    code, report, human = audit("--data-root", used_root)
    assert code == 0, human
    check = report["checks"][0]  # type: ignore[index]
    assert check["info"]["journal_attempts"] == 1 and check["info"]["sharing"] == "private"


def test_a_held_retention_is_said_beside_the_findings_never_as_one(used_root: Path) -> None:
    """spool.journal rule 7a: the audit says why retention removes nothing now (the
    worker's own enum word), as information: holding costs disk, not history. A word
    that is not the enum's is never printed."""
    status = used_root / "worker.status.json"

    def say(held: object) -> tuple[int, dict[str, Any], str]:
        doc = json.loads(status.read_bytes())
        doc["retention_held"] = held
        status.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        code, report, human = audit("--data-root", used_root)
        info: dict[str, Any] = report["checks"][0]["info"]  # type: ignore[index]
        return code, info, human

    code, info, human = say("clock_ahead_of_record")
    assert code == 0 and info["retention_held"] == "clock_ahead_of_record", human
    assert "retention_held=clock_ahead_of_record" in human
    # Customer-like bytes in the status file are the redaction scan's finding; the
    # word is never printed and says nothing about retention.
    code, info, human = say("김민지 010-1234")
    assert code == 1 and "retention_held" not in info
    assert "김민지" not in human and "010-1234" not in human
    code, info, human = say("held_forever")
    assert code == 0 and "retention_held" not in info and "held_forever" not in human
    code, info, _ = say(None)
    assert code == 0 and "retention_held" not in info


def test_a_shared_group_root_as_the_worker_made_it_is_clean(
    data_root: Path, fake_api: FakeOpenAI
) -> None:
    """The documented shared-group layout (``install -d -m 2770 -g <group>``): the
    worker creates the journal segment 0660 in the group, and the audit reported
    it as ``journal_writable_by_others`` (exit 1) on a root nobody had touched."""
    data_root.mkdir(mode=0o700)
    os.chown(data_root, -1, os.getegid())
    os.chmod(data_root, 0o2770)
    _traffic(data_root, fake_api)
    segment = next(DataRoot(data_root).outcomes.glob("*.jsonl"))
    assert oct(os.lstat(segment).st_mode & 0o7777) == oct(0o660)
    code, report, human = audit("--data-root", data_root)
    assert code == 0, human
    assert check_of(report, "data_root")["info"]["sharing"] == "shared_group"
    # Still a finding there: a journal file "other" may write.
    os.chmod(segment, 0o662)
    code, report, _ = audit("--data-root", data_root)
    assert code == 1
    assert ("data_root", "journal_writable_by_others", f"outcomes/{segment.name}") in findings(
        report
    )


def test_an_entry_consumed_while_the_audit_walks_is_skipped_not_unusable(
    used_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit runs beside a live worker and gateways: a request claimed or a
    folder emptied between the listing and the look is consumed, not unreadable.
    It made the whole data-root check unusable (``data_root_unreadable``)."""
    from kexpr.ops._audit_data_root import audit_data_root

    root = DataRoot(used_root)
    planted = root.spool / "requests" / ("c" * 32 + ".json")
    planted.write_bytes(b"{}")
    planted.chmod(0o600)
    real_scandir = os.scandir
    gone: list[str] = []

    class Listed:
        def __init__(self, entries: list[os.DirEntry[str]]) -> None:
            self.entries = entries

        def __enter__(self) -> Iterator[os.DirEntry[str]]:
            return iter(self.entries)

        def __exit__(self, *exc: object) -> None:
            return None

    def scandir(path: Any) -> Any:
        with real_scandir(path) as it:
            entries = list(it)
        here = Path(path)
        if here == root.spool / "requests":  # claimed after the listing
            planted.unlink()
            gone.append("file")
        if here == root.spool:  # a folder gone after its parent was listed
            (root.spool / "tmp").rmdir()
            gone.append("folder")
        return Listed(entries)

    monkeypatch.setattr(os, "scandir", scandir)
    result = audit_data_root(used_root)
    monkeypatch.undo()
    assert sorted(gone) == ["file", "folder"]
    assert result.unusable is None, result.unusable
    assert result.findings == []
    assert result.info["journal_attempts"] == 1


STAGED = json.dumps(
    {
        "schema": "korean-expression-v4",
        "request_id": "4b716e26f5f8304806a1274b8f183852",
        "created_at_utc": "2026-12-04T10:00:00.000000Z",
        "style": "차분히",
    },
    ensure_ascii=False,
).encode("utf-8")
OPEN_STYLE = STAGED.index("차분히".encode())  # just inside the style literal's opening quote


# What a reader of a live tmp/ can meet of a message being written: none is a leak.
BEING_WRITTEN = {
    "reserved, not written": b"\0" * 4096,
    "written, not truncated": STAGED + b"\0" * 4096,
    "cut in a timestamp": STAGED[: STAGED.index(b"00.000000Z")],
    "cut in an ID": STAGED[: STAGED.index(b"6e26f5")],
    "cut in a lexeme": STAGED[: STAGED.index("히".encode()) + 1],
    "cut in a key": STAGED[: STAGED.index(b"created")],
}
# What was written before the cut is judged: only the word being written is spared.
WRITTEN_LEAKS = [
    (STAGED[:OPEN_STYLE] + f"{CUSTOMER[0]} 님 차".encode(), "spool_unexpected_hangul"),
    (STAGED[:OPEN_STYLE] + f"{CUSTOMER[1]} 차분".encode(), "spool_digits"),
    (f"{CUSTOMER[0]} {CUSTOMER[1]}".encode(), "spool_digits"),
    (f"{CUSTOMER[1]} {CUSTOMER[0]}".encode(), "spool_unexpected_hangul"),
    (b'{"n": 12, "t": "\\u' + b"\0" * 8 + b'", "x": 7.2kg}', "spool_digits"),
]


def test_a_staging_file_being_written_is_judged_by_what_was_written(used_root: Path) -> None:
    """A live spool's tmp/ holds files being written: a reservation is allocated
    (zeros) before its text, and a reader can see any prefix of the text. The
    audit called every such file ``spool_digits``. Every whole word written
    before the cut, in a literal or outside one, is still judged."""
    from kexpr.ops._audit_data_root import audit_data_root

    staged = DataRoot(used_root).tmp / f".{'4b716e26' * 4}.json.reserve.18086.d6e369ca9f4e"
    for case, written in BEING_WRITTEN.items():
        staged.write_bytes(written)
        staged.chmod(0o600)
        result = audit_data_root(used_root)
        assert result.unusable is None and result.findings == [], case
    for written, finding in WRITTEN_LEAKS:
        staged.write_bytes(written)
        result = audit_data_root(used_root)
        assert result.unusable is None
        assert finding in {f.finding.value for f in result.findings}, written


def test_the_staging_files_of_a_live_root_are_judged_as_what_they_become(
    used_root: Path,
) -> None:
    """A heartbeat or an identity file is replaced through a staging file beside
    it; the identity key is created through one in ``tmp/``, and so are the
    glossary and the quarantine ask, whose names hold a hyphen. The audit called
    each an ``unexpected_file`` and read the key's random bytes as ``spool_digits``."""
    from kexpr.ops._audit_data_root import audit_data_root

    root = DataRoot(used_root)
    staged = {
        root.root / ".worker.status.json.7.0123456789ab": b'{"schema": "kexpr-worker-stat',
        root.root / ".identity.key.7.0123456789ab": bytes(range(48, 80)),
        root.tmp / ".identity.key.8.0123456789ab": bytes(range(48, 80)),
        root.tmp / ".operator-glossary.json.7.0123456789ab": b"{",
        root.tmp / ".quarantine-clear.request.7.0123456789ab": b"{",
    }
    for path, data in staged.items():
        path.write_bytes(data)
        path.chmod(0o600)
    result = audit_data_root(used_root)
    assert result.unusable is None and result.findings == [], result.findings
    # Judged as what they become: a key shared with the group, a status that leaks.
    (root.tmp / ".identity.key.8.0123456789ab").chmod(0o640)
    (root.root / ".worker.status.json.7.0123456789ab").write_text(
        f'{{"note": "{CUSTOMER[0]} 님 차', "utf-8"
    )
    got = {(f.finding.value, f.detail) for f in audit_data_root(used_root).findings}
    assert got == {
        ("identity_key_shared", "spool/tmp/.identity.key.8.0123456789ab"),
        ("bad_mode", "spool/tmp/.identity.key.8.0123456789ab"),
        ("spool_unexpected_hangul", ".worker.status.json.7.0123456789ab"),
    }


# A customer's name and phone number, and staging-style names to hide them under.
PHONE = "010-4821-7365"
THREE_DAYS = 3 * 86400
# Cut inside one word, as a writer killed mid-write would leave it: the scan of
# a file being written spares a cut last word, so only its age can tell.
CUT = f'{{"style": "{CUSTOMER[0]}{PHONE.replace("-", "")}'.encode()
WHOLE = f'{{"note": "{CUSTOMER[0]} {PHONE}"}}'.encode()
# (where, name, content, what the audit finds); `shown` is where it names it.
PLANTED = [
    (("spool", "tmp"), ".outcomes.48213.d15ea5edbeef", WHOLE, "unexpected_file"),
    (("spool", "tmp"), ".outcomes.1234567890.d15ea5edbeef", WHOLE, "unexpected_file"),
    ((), ".spool.48213.d15ea5edbeef", WHOLE, "unexpected_file"),
    (("spool", "tmp"), f".{'c0ffee00' * 4}.json.1234567890.d15ea5edbeef", CUT, "unexpected_file"),
    (("spool", "requests"), f".{'c0ffee00' * 4}.json.48213.d15ea5edbeef", CUT, "unexpected_file"),
    (("spool", "tmp"), f".{'c0ffee01' * 4}.json.39.d15ea5edbeef", CUT, "stale_staging_file"),
    ((), ".worker.status.json.39.d15ea5edbeef", CUT, "stale_staging_file"),
]
STALE_SHOWN = {
    f"spool/tmp/.{'c0ffee01' * 4}.json.39.d15ea5edbeef",
    ".worker.status.json.39.d15ea5edbeef",
}


def _plant(root: Path, where: tuple[str, ...], name: str, data: bytes, age: float) -> Path:
    path = root.joinpath(*where, name)
    path.write_bytes(data)
    path.chmod(0o600)
    then = time.time() - age
    os.utime(path, (then, then))
    return path


@pytest.mark.parametrize(
    ("where", "name", "data", "finding"),
    PLANTED,
    ids=[
        "tmp-outcomes",
        "tmp-outcomes-10-digit-pid",
        "top-spool",
        "tmp-message-10-digit-pid",
        "requests-message-staging",
        "tmp-message-stale",
        "top-heartbeat-stale",
    ],
)
def test_a_staging_style_name_is_accepted_only_where_and_while_the_product_writes_it(
    used_root: Path, where: tuple[str, ...], name: str, data: bytes, finding: str
) -> None:
    """A staging name of a file the product never stages there, with a pid no
    process can have, or outside ``spool/tmp/`` (but a heartbeat's, beside it)
    is an unexpected file; one three days old (or dated ahead) is no longer
    being written. Either way its content is judged whole. Each was ``clean``:
    judged by the name it claims, or spared its cut last word."""
    from kexpr.ops._audit_data_root import audit_data_root

    for age in (THREE_DAYS, -THREE_DAYS):
        path = _plant(used_root, where, name, data, age)
        result = audit_data_root(used_root)
        path.unlink()
        got = {f.finding.value for f in result.findings}
        assert result.unusable is None
        assert finding in got and "spool_digits" in got, (age, got)
        shown = {f.detail for f in result.findings}
        if finding == "unexpected_file":
            assert all(d.endswith("<unrecognized>") for d in shown), shown
        else:
            assert shown <= STALE_SHOWN, shown
    if finding == "stale_staging_file":  # young: being written, as before
        path = _plant(used_root, where, name, data, 1.0)
        assert audit_data_root(used_root).findings == []


def test_a_customer_under_staging_style_names_makes_the_audit_fail_and_prints_none_of_it(
    used_root: Path,
) -> None:
    """Every planted file at once, three days old, through the command: exit 1
    in both outputs, and not one byte of an unrecognized name or of any
    content, neither the name, the phone number's digits nor a planted pid."""
    for where, name, data, _ in PLANTED:
        _plant(used_root, where, name, data, THREE_DAYS)
    human = kexpr("audit", "--data-root", used_root)
    js = kexpr("audit", "--data-root", used_root, "--json")
    assert human.returncode == js.returncode == 1, human.stdout
    report = json.loads(js.stdout)
    assert report["verdict"] == "findings"
    got = {(f, d) for _, f, d in findings(report)}
    assert {("stale_staging_file", d) for d in STALE_SHOWN} <= got
    assert {
        ("unexpected_file", "<unrecognized>"),
        ("unexpected_file", "spool/tmp/<unrecognized>"),
    } <= got
    assert ("unexpected_file", "spool/requests/<unrecognized>") in got
    # The JSON escapes Hangul: searched decoded too. The root's own path is the
    # operator's (pytest's numbered folder), not a planted byte.
    decoded = json.dumps(report, ensure_ascii=False)
    text = human.stdout + human.stderr + js.stdout + js.stderr + decoded
    text = text.replace(str(used_root), "<root>")
    hidden = (CUSTOMER[0], PHONE, "4821", "7365", "48213", "1234567890", "c0ffee00")
    for needle in (*hidden, ".outcomes", ".spool"):
        assert needle not in text, needle


def test_display_path_names_only_what_the_product_writes_at_that_place() -> None:
    """A staging shape is shown only for a file the product stages there, with
    a pid a process can have (Linux: at most 4194304); a 10-digit "pid" was
    shown, digits and all. Below an unrecognized name nothing is shown."""
    from kexpr.spool.fsio import PID_MAX_LIMIT, staged_final

    msg = f".{'ab' * 16}.json"
    hexes = "0123456789ab"
    assert staged_final(f"{msg}.{PID_MAX_LIMIT}.{hexes}") == msg[1:]
    for pid in ("1234567890", str(PID_MAX_LIMIT + 1), "0123", "0", "12345678"):
        assert staged_final(f"{msg}.{pid}.{hexes}") is None, pid
    shown = {
        ("spool", "tmp", f"{msg}.7.{hexes}"),
        ("spool", "tmp", f"{msg}.reserve.{PID_MAX_LIMIT}.{hexes}"),
        ("spool", "tmp", f".identity.key.7.{hexes}"),
        (f".identity.sealed.7.{hexes}",),
        (f".supervisor.status.json.7.{hexes}",),
    }
    unrecognized = {
        ("spool", "tmp", f"{msg}.1234567890.{hexes}"),
        ("spool", "tmp", f".outcomes.7.{hexes}"),
        ("spool", "tmp", f".identity.sealed.7.{hexes}"),  # never staged in tmp/
        ("spool", "tmp", f".identity.key.reserve.7.{hexes}"),  # only an answer is reserved
        ("spool", "requests", f"{msg}.7.{hexes}"),
        ("spool", "requests", "identity.key"),
        ("outcomes", f".2026-11-30.jsonl.7.{hexes}"),
        (f".spool.7.{hexes}",),
        (f".journal.lock.7.{hexes}",),
        (f"{msg}.7.{hexes}",),
        (f".worker.status.json.1234567890.{hexes}",),
    }
    for rel in shown:
        assert display_path(rel) == "/".join(rel)
    for rel in unrecognized:
        assert display_path(rel) == "/".join((*rel[:-1], "<unrecognized>")), rel
    assert display_path((CUSTOMER[0], "spool", "tmp")) == "/".join(["<unrecognized>"] * 3)


def test_data_root_tampering_is_found(used_root: Path, tmp_path: Path) -> None:
    root = DataRoot(used_root)
    os.chmod(root.identity_key, 0o640)
    os.chmod(root.outcomes, 0o705)
    os.symlink(tmp_path, root.spool / "requests" / ("a" * 32 + ".json"))
    leak = root.spool / "reports" / ("b" * 32 + ".json")
    leak.write_text(json.dumps({"note": f"{CUSTOMER[0]} {CUSTOMER[1]}"}, ensure_ascii=False))
    os.chmod(leak, 0o600)
    (root.root / f"{CUSTOMER[0]}.txt").write_text("x")
    code, report, _ = audit("--data-root", used_root)
    assert code == 1
    got = {(f, d) for _, f, d in findings(report)}
    assert got >= {
        ("identity_key_shared", "identity.key"),
        ("bad_mode", "identity.key"),
        ("world_accessible", "outcomes"),
        ("symlink", "spool/requests/" + "a" * 32 + ".json"),
        ("spool_malformed", "spool/reports/" + "b" * 32 + ".json"),
        ("spool_digits", "spool/reports/" + "b" * 32 + ".json"),
        ("spool_unexpected_hangul", "spool/reports/" + "b" * 32 + ".json"),
        ("unexpected_file", "<unrecognized>"),
    }
    # The journal's own rules refuse a world-readable outcomes/ too.
    assert ("journal_unverified", "unsafe_file in outcomes") in got


def test_a_tampered_journal_row_is_found(used_root: Path) -> None:
    segment = next(DataRoot(used_root).outcomes.glob("*.jsonl"))
    data = bytearray(segment.read_bytes())
    data[data.index(b"shadow_selected")] = ord("S")
    segment.write_bytes(bytes(data))
    code, report, _ = audit("--data-root", used_root)
    assert code == 1
    assert findings(report) == [
        ("data_root", "journal_unverified", f"state_outcome in outcomes/{segment.name}")
    ]


def test_display_path_shows_only_product_names() -> None:
    assert (
        display_path(("spool", "requests", "0" * 32 + ".json"))
        == "spool/requests/" + "0" * 32 + ".json"
    )
    assert display_path(("outcomes", "2026-11-30.jsonl")) == "outcomes/2026-11-30.jsonl"
    assert display_path(("spool", "tmp", "김민지 72.4kg")) == "spool/tmp/<unrecognized>"


def test_audit_needs_at_least_one_input() -> None:
    out = kexpr("audit")
    assert out.returncode == 2 and "give at least one of" in out.stderr
