"""What ``import gateway_shim`` loads of kexpr and the gateway side, pinned by
equality: the host process loads only the host side (no journal, no journal
verifier or audit, no worker, no ops module). A new module here is a decision,
made in this list and in docs/performance.md ("Importing the gateway side").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

LOADED = frozenset(
    {
        "gateway_shim",
        "gateway_shim._awaiting",
        "gateway_shim._binding",
        "gateway_shim._candidate",
        "gateway_shim._conclusion",
        "gateway_shim._data_root",
        "gateway_shim._dual_glossary",
        "gateway_shim._guest",
        "gateway_shim._heartbeat",
        "gateway_shim._identity_store",
        "gateway_shim._presentation",
        "gateway_shim._responses",
        "gateway_shim._setup",
        "gateway_shim._specs",
        "gateway_shim._waits",
        "gateway_shim._watch",
        "gateway_shim.config",
        "gateway_shim.coordinator",
        "gateway_shim.glossary",
        "gateway_shim.identity",
        "gateway_shim.operator_glossary",
        "gateway_shim.surfaces",
        "gateway_shim.surfaces._card_layout",
        "gateway_shim.surfaces._characters",
        "gateway_shim.surfaces._model",
        "gateway_shim.surfaces._reasons",
        "gateway_shim.surfaces._slots",
        "gateway_shim.surfaces._text",
        "gateway_shim.surfaces.adaptive",
        "gateway_shim.surfaces.card",
        "gateway_shim.surfaces.daily",
        "gateway_shim.surfaces.dual",
        "gateway_shim.surfaces.physique",
        "gateway_shim.surfaces.weekly",
        "gateway_shim.telemetry",
        "kexpr",
        "kexpr.spool",
        "kexpr.spool._journal_identity",
        "kexpr.spool._locks",
        "kexpr.spool._sharing",
        "kexpr.spool._walk",
        "kexpr.spool.canonical",
        "kexpr.spool.contract",
        "kexpr.spool.contract._budget_table",
        "kexpr.spool.contract._grammar",
        "kexpr.spool.contract._judge",
        "kexpr.spool.contract._models",
        "kexpr.spool.contract._strictjson",
        "kexpr.spool.contract.answers",
        "kexpr.spool.contract.budget",
        "kexpr.spool.contract.fit",
        "kexpr.spool.contract.lexicon",
        "kexpr.spool.contract.manifest",
        "kexpr.spool.contract.reasons",
        "kexpr.spool.errors",
        "kexpr.spool.fsio",
        "kexpr.spool.layout",
        "kexpr.spool.lifecycle",
        "kexpr.spool.log",
        "kexpr.spool.messages",
        "kexpr.spool.outcomes",
        "kexpr.spool.status",
    }
)


def test_import_gateway_shim_loads_exactly_the_host_side() -> None:
    code = (
        "import json, sys, gateway_shim;"
        "print(json.dumps(sorted(m for m in sys.modules"
        " if m.split('.')[0] in ('kexpr', 'gateway_shim'))))"
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, env=env, capture_output=True, text=True
    )
    loaded = frozenset(json.loads(out.stdout))
    assert loaded == LOADED, (sorted(loaded - LOADED), sorted(LOADED - loaded))
