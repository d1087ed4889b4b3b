"""The ``kexpr.*`` log records (spool.log, docs/cli.md "Logging"): content-free by
construction, silent in a host by default, shown by ``kexpr -v``.

The end-to-end test runs ``kexpr -vv supervise`` (the supervisor passes the
verbosity to its worker) against the loopback fake, presents customer material
through the shim in this process with a handler on ``kexpr``, and then holds
every record — the processes' stderr and this process's — to a whitelist: a
fixed event name and ``field=value`` pairs whose values are enum words, numbers or
booleans. A whitelist, not a leak scan: nothing else can pass it.
"""

from __future__ import annotations

import enum
import logging
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fakeapi import FakeOpenAI, compose_reply, default_style
from kit.supervisor import start_supervisor
from reference_host.samples import CUSTOMER_VALUES

from gateway_shim import (
    DailyFacts,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    WeeklyInterpretation,
    WeeklyJudgment,
    exact_block,
    format_daily,
    format_weekly,
)
from kexpr.spool import log
from kexpr.spool.layout import DataRoot
from kexpr.worker.daemon import wait_ready

KEY = "sk-log-records-5e1d9b"
# One record as `kexpr.spool.log.configure` formats it, after its timestamp.
RECORD = re.compile(
    r"(DEBUG|INFO|WARNING|ERROR) (kexpr(?:\.[a-z]+)?) ([a-z][a-z0-9_]*)((?: [a-z_]+=[^ ]+)*)"
)
STAMP = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3} ")
VALUE = re.compile(r"-?[0-9]+(\.[0-9]+)?|true|false|none|other|[a-z][a-z0-9_.]*")
# `kexpr.spool.log.OperatorPath`, percent-encoded.
OPERATOR_PATH = re.compile(r"/[A-Za-z0-9/%._~-]*")


def _product_words() -> set[str]:
    """Every enum value of the product packages, and the known constants."""
    import importlib
    import pkgutil

    words: set[str] = set()
    for top in ("kexpr.spool", "gateway_shim", "kexpr.worker", "kexpr.ops"):
        package = importlib.import_module(top)
        for info in pkgutil.walk_packages(package.__path__, top + "."):
            if info.name.startswith(("kexpr.ops.demo", "kexpr.worker.__main__")):
                continue
            module = importlib.import_module(info.name)
            for value in vars(module).values():
                if (
                    isinstance(value, type)
                    and issubclass(value, enum.Enum)
                    and value.__module__ == module.__name__
                ):
                    for member in value:
                        words.add(
                            str(member.value).lower()
                            if not isinstance(member.value, str)
                            else member.value
                        )
                        words.add(member.name.lower())
    from gateway_shim.config import SURFACE_SWITCH
    from kexpr.ops.cli import COMMANDS
    from kexpr.ops.supervisor import DIAGNOSTICS

    return words | set(SURFACE_SWITCH) | set(DIAGNOSTICS) | set(COMMANDS)


def assert_whitelisted(lines: list[str], words: set[str]) -> list[tuple[str, str, dict[str, str]]]:
    out = []
    for line in lines:
        m = RECORD.fullmatch(STAMP.sub("", line, count=1))
        assert m, line
        fields = dict(pair.split("=", 1) for pair in m.group(4).split())
        for key, value in fields.items():
            if key == "data_root":  # the operator's configured path (`log.OperatorPath`)
                assert OPERATOR_PATH.fullmatch(value), line
                continue
            assert VALUE.fullmatch(value), line
            assert re.fullmatch(r"-?[0-9.]+|true|false|none|other", value) or value in words, line
        out.append((m.group(2), m.group(3), fields))
    return out


def test_the_top_logger_is_silent_in_a_host_by_default(tmp_path: Path) -> None:
    code = (
        "import logging, gateway_shim\n"
        "from kexpr.spool import log\n"
        "top = logging.getLogger('kexpr')\n"
        "assert [type(h).__name__ for h in top.handlers] == ['NullHandler'], top.handlers\n"
        "from gateway_shim.config import Mode\n"
        "log.event(log.logger('shim'), logging.ERROR, 'probe', mode=Mode.SHADOW)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    # An ERROR record without a configured handler: logging's last resort would
    # print it; the NullHandler keeps the host's stderr untouched.
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_event_refuses_anything_but_enum_words_numbers_and_booleans(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = log.logger("test")
    with caplog.at_level(logging.DEBUG, logger="kexpr"):
        log.event(
            logger,
            logging.INFO,
            "ok_event",
            mode=Mode.SHADOW,
            n=3,
            flag=True,
            gone=None,
            surface=log.known("daily.v1", {"daily.v1"}),
            data_root=log.OperatorPath("/srv/kexpr x/\n데이터"),
        )
        log.event(
            logger,
            logging.INFO,
            "leaky",
            text=CUSTOMER_VALUES[0],  # type: ignore[arg-type]
            raw=b"x",  # type: ignore[arg-type]
            path=Path("/x"),  # type: ignore[arg-type]
            surface=log.known(CUSTOMER_VALUES[1], {"daily.v1"}),
        )
        log.event(logger, logging.INFO, CUSTOMER_VALUES[0])
    assert [r.getMessage() for r in caplog.records] == [
        "ok_event mode=shadow n=3 flag=true gone=none surface=daily.v1"
        " data_root=/srv/kexpr%20x/%0A%EB%8D%B0%EC%9D%B4%ED%84%B0",
        "leaky text=<refused> raw=<refused> path=<refused> surface=other",
        "<refused>",
    ]
    assert all(r.name == "kexpr.test" for r in caplog.records)


def test_cli_verbosity_is_what_the_child_gets() -> None:
    code = (
        "import logging, sys\n"
        "from kexpr.spool import log\n"
        "from kexpr.ops.supervisor import WorkerSpec, worker_command\n"
        "from pathlib import Path\n"
        "print(worker_command(WorkerSpec(Path('/r')))[3])\n"
        "log.configure(int(sys.argv[1]))\n"
        "print(worker_command(WorkerSpec(Path('/r')))[3])\n"
    )
    for n, flag in ((1, "-v"), (2, "-vv")):
        done = subprocess.run(
            [sys.executable, "-c", code, str(n)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert done.stdout.split() == ["--data-root", flag]


# The one styled message (a weekly report whose goal range is missing), with
# customer values in its facts and actions: a real request, call and answer.
WEEKLY = format_weekly(
    recent=CUSTOMER_VALUES[1],
    prior="72.10kg",
    change="+0.42%",
    rate="85.71%",
    goal_range="기록 없음",
    interpretation=WeeklyInterpretation.GOAL_MISSING,
    judgment=WeeklyJudgment.RECORDS,
    actions=[f"{CUSTOMER_VALUES[0]} 님 평균 섭취 {CUSTOMER_VALUES[2]} 유지"],
)
WEEKLY_FIELDS = ("average_weight_kg", "prior_average_weight_kg", "goal_range", "actions")
# A daily summary: nothing to style, so its one record is the presentation's.
DAILY = format_daily(
    weight=CUSTOMER_VALUES[1],
    intake=CUSTOMER_VALUES[2],
    macros="탄수화물 260g · 단백질 138g · 지방 70g",
    training="스쿼트 5세트",
    sleep="6시간 · 수면 질 4/5",
    condition="3/5",
    digestion="정상",
    water="2.1L",
)


def test_records_of_a_real_run_are_whitelisted(
    data_root: Path, fake_api: FakeOpenAI, tmp_path: Path
) -> None:
    fake_api.behaviour = compose_reply(default_style)
    DataRoot(data_root).ensure()
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    top = logging.getLogger("kexpr")
    handler, old_level = Keep(logging.DEBUG), top.level
    top.addHandler(handler)
    top.setLevel(logging.DEBUG)
    with open(tmp_path / "stderr.txt", "wb") as err:
        sup = start_supervisor(
            data_root,
            fake=fake_api,
            key=KEY,
            cli_args=("-vv",),
            wait=False,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        assert wait_ready(DataRoot(data_root), 30.0)
        for mode, event in ((Mode.SHADOW, "evt-log-1"), (Mode.ENABLED, "evt-log-2")):
            coord = KoreanExpressionCoordinator(
                KoreanExpressionConfig.from_block(exact_block(mode, daily=True, weekly=True)),
                data_root,
            )
            try:
                coord.present_weekly(
                    WEEKLY,
                    explicit_fields=WEEKLY_FIELDS,
                    schedule_key=event,
                    kind="weekly_report",
                    kst_day=CUSTOMER_VALUES[7],
                )
                coord.present_daily(
                    DAILY, facts=DailyFacts(complete=True), finalized_event_id=event
                )
            finally:
                coord.close()
    finally:
        top.removeHandler(handler)
        top.setLevel(old_level)
        sup.send_signal(signal.SIGTERM)
        try:
            code = sup.wait(30)
        except subprocess.TimeoutExpired:
            sup.kill()  # never left running for the next test
            sup.wait()
            raise
        assert code == 0
    words = _product_words()
    lines = (tmp_path / "stderr.txt").read_text("utf-8").splitlines()
    seen = assert_whitelisted([ln for ln in lines if " kexpr" in ln], words)
    names = {(logger, name) for logger, name, _ in seen}
    assert {
        ("kexpr.supervisor", "supervisor_state"),
        ("kexpr.worker", "worker_ready"),
        ("kexpr.worker", "worker_stopped"),
        ("kexpr.cli", "command_started"),
    } <= names
    # Every stderr line is a record or one of the product's fixed diagnostics.
    assert all(" kexpr" in ln or ln.startswith("kexpr ") for ln in lines), lines
    # In-process: the shim's records, same rules.
    mine = assert_whitelisted([f"{r.levelname} {r.name} {r.getMessage()}" for r in records], words)
    outcomes = [f["outcome"] for logger, name, f in mine if name == "presentation"]
    assert outcomes == ["shadow_selected", "nothing_to_style", "accepted", "nothing_to_style"]
    text = "\n".join(lines) + "\n".join(r.getMessage() for r in records)
    for value in (*CUSTOMER_VALUES, KEY, "evt-log"):
        assert value not in text
