"""File-system discipline (design §3; `kexpr.spool.fsio` rules 1-6): every violation is a
precise `UnsafeReason`, both sharing modes are exact, nothing is followed,
truncated or unlinked that must not be."""

from __future__ import annotations

import fcntl
import grp
import os
import pwd
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from kexpr.spool.fsio import (
    _PIN_MAX,
    PRIVATE,
    HeldFlock,
    LockTimeout,
    ProductLock,
    Sharing,
    UnsafePath,
    UnsafeReason,
    _Dir,
    _open_leaf,
    check_dir,
    check_tree,
    claim,
    create_private_file,
    make_flock,
    pin_ancestor,
    publish,
    read_private,
    read_private_identified,
    replace_private,
    unlink_if_same,
)
from kexpr.spool.layout import DataRoot
from kexpr.spool.outcomes import Outcome

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def mode_of(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def reason(excinfo: pytest.ExceptionInfo[UnsafePath]) -> UnsafeReason:
    return excinfo.value.reason


def read_refused(p: Path) -> UnsafeReason:
    """Why `read_private` refuses ``p`` (it must)."""
    with pytest.raises(UnsafePath) as e:
        read_private(p, max_bytes=10)
    return reason(e)


def put(root: DataRoot, d: Path, name: str, data: bytes = b"{}") -> Path:
    publish(root.tmp, d / name, data)
    return d / name


# ------------------------------------------------------------- private mode


def test_private_layout_is_0700_and_files_0600_whatever_the_umask(root: DataRoot) -> None:
    old = os.umask(0)
    try:
        p = put(root, root.responses, "a.json")
    finally:
        os.umask(old)
    for d in (root.root, *root.product_dirs()):
        assert mode_of(d) == 0o700, d
    assert mode_of(p) == 0o600
    old = os.umask(0o777)
    try:
        q = put(root, root.responses, "b.json")
    finally:
        os.umask(old)
    assert mode_of(q) == 0o600  # fchmod after O_EXCL: the umask cannot narrow it either


def test_ensure_recreates_missing_directories_with_exact_mode(root: DataRoot) -> None:
    os.rmdir(root.quarantine)
    old = os.umask(0o022)
    try:
        root.ensure()
    finally:
        os.umask(old)
    assert mode_of(root.quarantine) == 0o700


@pytest.mark.parametrize("component", ["spool", "spool/responses", "."])
def test_symlink_at_any_product_component_is_refused(
    root: DataRoot, tmp_path: Path, component: str
) -> None:
    """A directory replaced by a symlink to a look-alike: refused, not followed."""
    target = root.root / component if component != "." else root.root
    elsewhere = tmp_path / "elsewhere"
    os.rename(target, elsewhere)
    os.symlink(elsewhere, target)
    with pytest.raises(UnsafePath) as e:
        publish(root.tmp, root.responses / "x.json", b"{}")
    assert reason(e) is UnsafeReason.SYMLINK
    with pytest.raises(UnsafePath) as e:
        read_private(root.responses / "x.json", max_bytes=10)
    assert reason(e) is UnsafeReason.SYMLINK
    with pytest.raises(UnsafePath) as e:
        root.verify_tree()
    assert reason(e) is UnsafeReason.SYMLINK
    assert not list(elsewhere.rglob("x.json"))  # nothing was written through it


def test_symlinked_leaf_is_refused_and_never_written_through(
    root: DataRoot, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (root.responses / "x.json").symlink_to(victim)
    with pytest.raises(UnsafePath) as e:
        read_private(root.responses / "x.json", max_bytes=100)
    assert reason(e) is UnsafeReason.SYMLINK
    with pytest.raises(FileExistsError):
        publish(root.tmp, root.responses / "x.json", b"evil")  # link never replaces
    assert victim.read_bytes() == b"precious"
    assert os.listdir(root.tmp) == []  # staging undone


def test_data_root_itself_may_not_be_a_symlink_but_its_ancestors_may(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "alias").symlink_to(real)
    r = DataRoot(tmp_path / "alias" / "root")  # ancestor symlink: resolved once
    r.ensure()
    assert r.root == real / "root"
    publish(r.tmp, r.responses / "x.json", b"{}")
    (tmp_path / "rootlink").symlink_to(real / "root")
    with pytest.raises(UnsafePath) as e:
        DataRoot(tmp_path / "rootlink").ensure()
    assert reason(e) is UnsafeReason.SYMLINK


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o4600, 0o700])
def test_file_with_group_or_other_or_special_bits_is_refused_in_a_private_dir(
    root: DataRoot, mode: int
) -> None:
    p = put(root, root.responses, "x.json")
    os.chmod(p, mode)
    if mode == 0o700:
        assert read_private(p, max_bytes=10) == b"{}"  # owner bits only: fine
        return
    assert read_refused(p) is UnsafeReason.BAD_MODE


@pytest.mark.parametrize("mode", [0o755, 0o770, 0o750, 0o1700, 0o2700])
def test_directory_with_a_bad_mode_is_refused(root: DataRoot, mode: int) -> None:
    os.chmod(root.responses, mode)
    with pytest.raises(UnsafePath) as e:
        publish(root.tmp, root.responses / "x.json", b"{}")
    assert reason(e) is UnsafeReason.BAD_MODE
    with pytest.raises(UnsafePath) as e:
        root.verify_tree()
    assert reason(e) is UnsafeReason.BAD_MODE


def test_fifo_is_not_a_regular_file_and_does_not_hang(root: DataRoot) -> None:
    os.mkfifo(root.claimed / "x.json", 0o600)
    with pytest.raises(UnsafePath) as e:
        read_private(root.claimed / "x.json", max_bytes=10)
    assert reason(e) is UnsafeReason.NOT_REGULAR_FILE


def test_directory_where_a_file_belongs_is_refused(root: DataRoot) -> None:
    os.mkdir(root.claimed / "x.json", 0o700)
    with pytest.raises(UnsafePath) as e:
        read_private(root.claimed / "x.json", max_bytes=10)
    assert reason(e) is UnsafeReason.NOT_REGULAR_FILE


def test_file_where_a_directory_belongs_is_refused(root: DataRoot) -> None:
    os.rmdir(root.reports)
    fd = os.open(root.reports, os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
    with pytest.raises(UnsafePath) as e:
        root.verify_tree()
    assert reason(e) is UnsafeReason.NOT_DIRECTORY


def test_oversized_file_is_refused(root: DataRoot) -> None:
    p = put(root, root.claimed, "x.json", b"x" * 101)
    with pytest.raises(UnsafePath) as e:
        read_private(p, max_bytes=100)
    assert reason(e) is UnsafeReason.TOO_LARGE


@root_only
def test_file_of_another_owner_is_refused(root: DataRoot) -> None:
    p = put(root, root.claimed, "x.json")
    os.chown(p, pwd.getpwnam("nobody").pw_uid, -1)
    assert read_refused(p) is UnsafeReason.WRONG_OWNER


@root_only
def test_directory_of_another_owner_is_refused(root: DataRoot) -> None:
    os.chown(root.claimed, pwd.getpwnam("nobody").pw_uid, -1)
    with pytest.raises(UnsafePath) as e:
        root.verify_tree()
    assert reason(e) is UnsafeReason.WRONG_OWNER


def test_inode_swapped_between_read_and_remove_is_not_removed(root: DataRoot) -> None:
    p = put(root, root.claimed, "x.json", b"first")
    data, fid = read_private_identified(p, max_bytes=10)
    assert data == b"first"
    os.rename(p, root.tmp / "kept")  # kept alive: its inode number cannot be reused
    put(root, root.claimed, "x.json", b"second")  # a different inode at the same path
    with pytest.raises(UnsafePath) as e:
        unlink_if_same(p, fid)
    assert reason(e) is UnsafeReason.INODE_CHANGED
    assert p.read_bytes() == b"second"
    _, fid2 = read_private_identified(p, max_bytes=10)
    assert unlink_if_same(p, fid2) and not p.exists()
    assert unlink_if_same(p, fid2) is False  # already gone


def test_o_trunc_is_never_used(root: DataRoot) -> None:
    with _Dir(root.claimed) as d, pytest.raises(ValueError):
        _open_leaf(d, "x.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)


def test_publish_never_replaces_and_claim_has_one_winner(root: DataRoot) -> None:
    put(root, root.requests, "r.json", b"one")
    with pytest.raises(FileExistsError):
        publish(root.tmp, root.requests / "r.json", b"two")
    assert (root.requests / "r.json").read_bytes() == b"one"
    assert claim(root.requests / "r.json", root.claimed / "r.json") is True
    assert claim(root.requests / "r.json", root.claimed / "r.json") is False


def test_status_replace_keeps_directory_mode(root: DataRoot) -> None:
    replace_private(root.status_file, b"1")
    replace_private(root.status_file, b"2")
    assert root.status_file.read_bytes() == b"2" and mode_of(root.status_file) == 0o600


# -------------------------------------------------------------------- locks


def test_lock_file_is_created_private_and_never_unlinked(root: DataRoot) -> None:
    lock = make_flock(root.journal_lock)
    with lock:
        ino = os.stat(root.journal_lock).st_ino
    with lock:
        pass
    assert os.stat(root.journal_lock).st_ino == ino and mode_of(root.journal_lock) == 0o600


def test_lock_file_swapped_after_first_use_is_refused(root: DataRoot) -> None:
    lock = make_flock(root.journal_lock)
    with lock:
        pass
    fd = os.open(root.root / "other", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    os.rename(root.root / "other", root.journal_lock)  # a new inode at the lock path
    with pytest.raises(UnsafePath) as e:
        lock.acquire()
    assert reason(e) is UnsafeReason.INODE_CHANGED
    assert not lock.is_locked


@pytest.mark.parametrize("kind", [ProductLock, HeldFlock], ids=["product", "held"])
@pytest.mark.parametrize("bad", ["symlink", "mode", "fifo"])
def test_unsafe_lock_file_is_refused(root: DataRoot, tmp_path: Path, bad: str, kind: type) -> None:
    if bad == "symlink":
        (tmp_path / "t").write_bytes(b"")
        root.journal_lock.symlink_to(tmp_path / "t")
        expected = UnsafeReason.SYMLINK
    elif bad == "mode":
        fd = os.open(root.journal_lock, os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)
        os.chmod(root.journal_lock, 0o644)
        expected = UnsafeReason.BAD_MODE
    else:
        os.mkfifo(root.journal_lock, 0o600)
        expected = UnsafeReason.NOT_REGULAR_FILE
    lock = kind(root.journal_lock)
    with pytest.raises(UnsafePath) as e:
        lock.acquire()
    assert reason(e) is expected and not lock.is_locked


# HeldFlock: the journal writer's lock (one checked descriptor, flock per use).


def test_held_lock_file_is_created_private_and_never_unlinked(root: DataRoot) -> None:
    lock = HeldFlock(root.journal_lock)
    with lock:
        ino = os.stat(root.journal_lock).st_ino
        assert lock.is_locked
    assert not lock.is_locked
    with lock:
        pass
    lock.close()
    with lock:  # re-opened after close: the same inode
        pass
    assert os.stat(root.journal_lock).st_ino == ino and mode_of(root.journal_lock) == 0o600


@pytest.mark.parametrize("first", ["held", "product"])
def test_held_and_product_locks_exclude_each_other(root: DataRoot, first: str) -> None:
    """The worker holds a HeldFlock, an ops tool a ProductLock: same inode, flock(2)."""
    held, product = HeldFlock(root.journal_lock), make_flock(root.journal_lock)
    a, b = (held, product) if first == "held" else (product, held)
    with a:
        with pytest.raises(LockTimeout):
            b.acquire(timeout=0)
        with pytest.raises(LockTimeout):
            b.acquire(timeout=0.05)
    b.acquire(timeout=0)
    b.release()


def test_held_lock_is_reentrant_until_the_outer_release(root: DataRoot) -> None:
    lock, other = HeldFlock(root.journal_lock), make_flock(root.journal_lock)
    with lock:
        with lock:
            pass
        with pytest.raises(LockTimeout):  # the inner release did not unlock
            other.acquire(timeout=0)
    other.acquire(timeout=0)
    other.release()
    with pytest.raises(RuntimeError):
        lock.release()


@pytest.mark.parametrize("change", ["swapped", "removed", "symlink", "mode"])
def test_held_lock_refuses_a_lock_path_changed_after_first_use(
    root: DataRoot, tmp_path: Path, change: str
) -> None:
    lock = HeldFlock(root.journal_lock)
    with lock:
        pass
    expected = UnsafeReason.INODE_CHANGED
    if change == "swapped":
        fd = os.open(root.root / "other", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        os.rename(root.root / "other", root.journal_lock)
    elif change == "removed":
        os.unlink(root.journal_lock)
    elif change == "symlink":
        os.rename(root.journal_lock, tmp_path / "real.lock")
        root.journal_lock.symlink_to(tmp_path / "real.lock")
    else:
        os.chmod(root.journal_lock, 0o644)
        expected = UnsafeReason.BAD_MODE
    with pytest.raises(UnsafePath) as e:
        lock.acquire()
    assert reason(e) is expected
    assert not lock.is_locked
    # The refused acquire let go of the flock: a new open file description of
    # the very inode it holds (through /proc) can take it at once.
    fd = os.open(f"/proc/self/fd/{lock._fd}", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_held_lock_refuses_a_data_root_swapped_after_first_use(
    root: DataRoot, tmp_path: Path
) -> None:
    lock = HeldFlock(root.journal_lock)
    with lock:
        pass
    os.rename(root.root, tmp_path / "aside")
    DataRoot(root.root).ensure()
    fd = os.open(root.journal_lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    with pytest.raises(UnsafePath) as e:
        lock.acquire()
    assert reason(e) is UnsafeReason.INODE_CHANGED


def test_ops_lock_never_creates_a_lock_file(root: DataRoot) -> None:
    lock = make_flock(root.worker_lock, create=False)
    with lock:
        pass
    assert not root.worker_lock.exists()


# ------------------------------------------------------- shared-group mode


@pytest.fixture
def shared_gid() -> int:
    """A group with at least one member other than us, if the machine has one."""
    for g in grp.getgrall():
        members = [pwd.getpwnam(n).pw_uid for n in g.gr_mem if _known(n)]
        members += [p.pw_uid for p in pwd.getpwall() if p.pw_gid == g.gr_gid]
        if any(u != os.geteuid() for u in members) and g.gr_gid != 0:
            return g.gr_gid
    pytest.skip("no group with another member on this machine")


def _known(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _member(gid: int) -> int:
    g = grp.getgrgid(gid)
    uids = [pwd.getpwnam(n).pw_uid for n in g.gr_mem if _known(n)]
    uids += [p.pw_uid for p in pwd.getpwall() if p.pw_gid == gid]
    return next(u for u in uids if u != os.geteuid())


def _non_member(gid: int) -> int:
    g = grp.getgrgid(gid)
    members = {pwd.getpwnam(n).pw_uid for n in g.gr_mem if _known(n)}
    return next(
        p.pw_uid
        for p in pwd.getpwall()
        if p.pw_gid != gid and p.pw_uid not in members and p.pw_uid != os.geteuid()
    )


def shared_root(tmp_path: Path, gid: int) -> DataRoot:
    """What the operator creates: ``install -d -m 2770 -g <group> root``."""
    d = tmp_path / "shared"
    d.mkdir()
    os.chown(d, -1, gid)
    os.chmod(d, 0o2770)
    r = DataRoot(d)
    r.ensure()
    return r


@root_only
def test_shared_group_layout_is_02770_and_files_0660_in_the_group(
    tmp_path: Path, shared_gid: int
) -> None:
    r = shared_root(tmp_path, shared_gid)
    for d in (r.root, *r.product_dirs()):
        st = os.lstat(d)
        assert stat.S_IMODE(st.st_mode) == 0o2770 and st.st_gid == shared_gid, d
    old = os.umask(0o077)  # systemd UMask=0077 must not make a response unreadable to the peer
    try:
        p = put(r, r.responses, "x.json")
    finally:
        os.umask(old)
    st = os.lstat(p)
    assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == shared_gid
    assert check_dir(r.root)[0] == Sharing(shared_gid)
    create_private_file(r.tmp, r.identity_key, b"k" * 32)
    assert mode_of(r.identity_key) == 0o600  # the key stays the gateway's alone


@root_only
def test_shared_group_accepts_a_member_and_refuses_a_stranger(
    tmp_path: Path, shared_gid: int
) -> None:
    r = shared_root(tmp_path, shared_gid)
    p = put(r, r.requests, "x.json")
    os.chown(p, _member(shared_gid), -1)  # written by the peer process
    assert read_private(p, max_bytes=10) == b"{}"
    os.chown(p, _non_member(shared_gid), -1)
    assert read_refused(p) is UnsafeReason.WRONG_OWNER


@root_only
def test_shared_group_trusts_the_data_root_owner_without_membership(
    tmp_path: Path, shared_gid: int
) -> None:
    """The gateway may be in the group only through systemd's SupplementaryGroups=
    (not in the group database): as the data root's owner it is still a party."""
    owner = _non_member(shared_gid)
    stranger = next(
        p.pw_uid
        for p in pwd.getpwall()
        if p.pw_uid not in (owner, os.geteuid())
        and p.pw_gid != shared_gid
        and p.pw_name not in grp.getgrgid(shared_gid).gr_mem
    )
    r = shared_root(tmp_path, shared_gid)
    os.chown(r.root, owner, -1)
    p = put(r, r.requests, "x.json")
    os.chown(p, owner, -1)
    assert read_private(p, max_bytes=10) == b"{}"
    r.verify_tree()
    os.chown(p, stranger, -1)
    assert read_refused(p) is UnsafeReason.WRONG_OWNER


@root_only
def test_shared_group_refuses_wrong_group_other_bits_and_mixed_modes(
    tmp_path: Path, shared_gid: int
) -> None:
    r = shared_root(tmp_path, shared_gid)
    p = put(r, r.requests, "x.json")
    os.chmod(p, 0o664)
    assert read_refused(p) is UnsafeReason.BAD_MODE
    os.chmod(p, 0o660)
    os.chown(p, -1, 0)
    assert read_refused(p) is UnsafeReason.WRONG_GROUP
    os.chmod(r.reports, 0o770)  # no setgid: new files would not inherit the group
    with pytest.raises(UnsafePath) as e:
        r.verify_tree()
    assert reason(e) is UnsafeReason.BAD_MODE
    os.chmod(r.reports, 0o700)  # private inside shared: not the declared mode
    with pytest.raises(UnsafePath) as e:
        r.ensure()
    assert reason(e) is UnsafeReason.BAD_MODE


def test_private_sharing_is_the_default() -> None:
    assert PRIVATE == Sharing() and not PRIVATE.shared
    assert (PRIVATE.dir_mode, PRIVATE.file_mode) == (0o700, 0o600)
    assert (Sharing(1234).dir_mode, Sharing(1234).file_mode) == (0o2770, 0o660)


@pytest.fixture(autouse=True)
def _no_stray_umask() -> Iterator[None]:
    old = os.umask(0o022)
    os.umask(old)
    yield
    assert os.umask(old) == old


@root_only
def test_exclusive_read_refuses_a_group_readable_key_in_a_shared_root(
    tmp_path: Path, shared_gid: int
) -> None:
    r = shared_root(tmp_path, shared_gid)
    create_private_file(r.tmp, r.identity_key, b"k" * 32)
    assert read_private(r.identity_key, max_bytes=32, exclusive=True) == b"k" * 32
    os.chmod(r.identity_key, 0o640)
    assert read_private(r.identity_key, max_bytes=32) == b"k" * 32  # what a plain read allows
    with pytest.raises(UnsafePath) as e:
        read_private(r.identity_key, max_bytes=32, exclusive=True)
    assert reason(e) is UnsafeReason.BAD_MODE


@pytest.mark.parametrize("damage", ["symlinked_requests", "bad_mode_tmp", "symlinked_root"])
def test_the_shim_answers_canonical_on_an_unsafe_spool(tmp_path: Path, damage: str) -> None:
    """The gateway side of the same rules: no exception reaches the host, the
    candidate is canonical (spool_unavailable), nothing is written through."""
    from kit.bodies import STYLED_BODY, present_styled

    from gateway_shim import (
        KoreanExpressionConfig,
        KoreanExpressionCoordinator,
        Mode,
        exact_block,
    )

    r = DataRoot(tmp_path / "root")
    r.ensure()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    if damage == "symlinked_requests":
        os.rmdir(r.requests)
        os.symlink(elsewhere, r.requests)
    elif damage == "bad_mode_tmp":
        os.chmod(r.tmp, 0o777)
    else:
        os.rename(r.root, elsewhere / "root")
        os.symlink(elsewhere / "root", r.root)
    coord = KoreanExpressionCoordinator(
        KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, weekly=True)), r.root
    )
    try:
        cand = present_styled(coord, "evt-1")
    finally:
        coord.close()
    assert cand.outcome is Outcome.SPOOL_UNAVAILABLE and cand.body == STYLED_BODY
    assert not list(elsewhere.rglob("*.json"))


def test_status_replace_never_touches_the_watched_spool_tree(root: DataRoot) -> None:
    """A heartbeat staged in spool/tmp and renamed into the data root is an
    unmatched IN_MOVED_FROM for the worker's recursive watch of spool/, which
    watchdog holds 500 ms, delaying every later event (design §4 trap 1). The
    heartbeats must produce no event at all under spool/."""
    import threading

    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    seen: list[str] = []
    flushed = threading.Event()

    class Record(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            if str(event.src_path).endswith("marker"):
                flushed.set()
            else:
                seen.append(type(event).__name__)

    observer = Observer()
    observer.schedule(Record(), str(root.spool), recursive=True)
    observer.start()
    try:
        for i in range(5):
            replace_private(root.status_file, str(i).encode())
            replace_private(root.root / "supervisor.status.json", str(i).encode())
        (root.requests / "marker").write_bytes(b"")  # a later event flushes the queue
        assert flushed.wait(10)
    finally:
        observer.stop()
        observer.join(5)
    assert [e for e in seen if "Dir" not in e] == []


# ------------------------------------------------------------- check_tree


def test_check_tree_agrees_with_check_dir_on_a_sound_tree(root: DataRoot) -> None:
    rels = tuple(str(d.relative_to(root.root)) for d in root.product_dirs())
    sharing, ids = check_tree(root.root, rels)
    assert sharing == check_dir(root.root)[0]
    assert ids == {".": check_dir(root.root)[1], **{r: check_dir(root.root / r)[1] for r in rels}}


@pytest.mark.parametrize(
    "damage",
    ["symlink_below", "symlink_at_root", "mode_below", "file_below", "missing_below"],
)
def test_check_tree_refuses_what_check_dir_refuses(
    root: DataRoot, tmp_path: Path, damage: str
) -> None:
    rels = tuple(str(d.relative_to(root.root)) for d in root.product_dirs())
    victim = root.requests
    if damage == "symlink_below":
        os.rename(victim, tmp_path / "real")
        victim.symlink_to(tmp_path / "real")
    elif damage == "symlink_at_root":
        os.rename(root.root, tmp_path / "real")
        root.root.symlink_to(tmp_path / "real")
        victim = root.root
    elif damage == "mode_below":
        os.chmod(victim, 0o755)
    elif damage == "file_below":
        os.rmdir(victim)
        victim.write_bytes(b"")
    else:
        os.rmdir(victim)
    with pytest.raises(OSError) as walked:
        check_dir(victim)
    with pytest.raises(OSError) as tree:
        check_tree(root.root, rels)
    assert type(tree.value) is type(walked.value)
    assert getattr(tree.value, "reason", None) == getattr(walked.value, "reason", None)


def test_check_tree_refuses_a_subdirectory_of_another_sharing(root: DataRoot) -> None:
    gid = os.getegid()
    os.chmod(root.reports, 0o2770)
    os.chown(root.reports, -1, gid)
    with pytest.raises(UnsafePath) as e:
        check_tree(root.root, ("spool", "spool/reports"))
    assert reason(e) is UnsafeReason.BAD_MODE


def test_glance_agrees_with_the_walk_on_a_sound_tree(root: DataRoot) -> None:
    assert root.glance_tree(root.sharing()) == root.verify_tree()


@pytest.mark.parametrize(
    "damage", ["symlink_below", "symlink_at_root", "mode_below", "file_below", "swapped"]
)
def test_glance_refuses_or_notices_what_the_walk_does(
    root: DataRoot, tmp_path: Path, damage: str
) -> None:
    sharing, before = root.sharing(), root.verify_tree()
    victim = root.requests
    if damage == "symlink_below":
        os.rename(victim, tmp_path / "real")
        victim.symlink_to(tmp_path / "real")
    elif damage == "symlink_at_root":
        os.rename(root.root, tmp_path / "real")
        root.root.symlink_to(tmp_path / "real")
    elif damage == "mode_below":
        os.chmod(victim, 0o755)
    elif damage == "file_below":
        os.rmdir(victim)
        victim.write_bytes(b"")
    else:
        os.rename(victim, tmp_path / "aside")
        os.mkdir(victim, 0o700)  # a look-alike: only its identity differs
    if damage == "swapped":
        assert root.verify_tree() != before
        assert root.glance_tree(sharing) != before
    else:
        with pytest.raises(UnsafePath) as walked:
            root.verify_tree()
        with pytest.raises(UnsafePath) as glanced:
            root.glance_tree(sharing)
        assert reason(glanced) is reason(walked)


def test_glance_does_not_see_a_symlink_above_the_root_that_leads_back(
    root: DataRoot, tmp_path: Path
) -> None:
    """The documented difference: only the walk (on the worker's timer) finds it."""
    sharing, before = root.sharing(), root.verify_tree()
    parent = root.root.parent
    os.rename(parent, tmp_path.parent / (tmp_path.name + "-real"))
    os.symlink(tmp_path.parent / (tmp_path.name + "-real"), parent)
    try:
        assert root.glance_tree(sharing) == before
        with pytest.raises(UnsafePath) as e:
            root.verify_tree()
        assert reason(e) is UnsafeReason.SYMLINK
    finally:
        os.unlink(parent)
        os.rename(tmp_path.parent / (tmp_path.name + "-real"), parent)


# ------------------------------------------------------ pinned ancestors


def test_a_change_above_the_data_root_cannot_redirect_a_later_open(tmp_path: Path) -> None:
    """Once walked, the data root's parent is pinned: a rename + symlink put in
    its place after start-up leads nowhere; only the fresh walk reports it."""
    base = tmp_path / "base"
    base.mkdir()
    root = DataRoot(base / "root")
    root.ensure()
    publish(root.tmp, root.requests / "before.json", b"1")  # pins `base`
    os.rename(base, tmp_path / "moved")
    decoy = tmp_path / "decoy"
    DataRoot(decoy / "root").ensure()
    os.symlink(decoy, base)
    publish(root.tmp, root.requests / "after.json", b"2")
    assert sorted(os.listdir(tmp_path / "moved" / "root" / "spool" / "requests")) == [
        "after.json",
        "before.json",
    ]
    assert os.listdir(decoy / "root" / "spool" / "requests") == []
    with pytest.raises(UnsafePath) as e:
        root.verify_tree()
    assert reason(e) is UnsafeReason.SYMLINK


def test_a_pinned_ancestor_is_walked_without_following_symlinks(tmp_path: Path) -> None:
    (tmp_path / "real" / "root").mkdir(parents=True, mode=0o700)
    os.symlink(tmp_path / "real", tmp_path / "link")
    pin_ancestor(tmp_path / "link")  # not resolved: its first walk meets the symlink
    with pytest.raises(UnsafePath) as e:
        check_dir(tmp_path / "link" / "root")
    assert reason(e) is UnsafeReason.SYMLINK


def test_pins_are_bounded_and_close_their_descriptors(tmp_path: Path) -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    roots = []
    for i in range(3 * _PIN_MAX):
        r = DataRoot(tmp_path / f"p{i}" / "root")
        r.ensure()
        roots.append(r)
    before = open_fds()
    for r in roots:
        DataRoot(r.root)  # re-registers (moves to the LRU end)
        check_dir(r.requests)  # walks through the pin: opens it once
    assert open_fds() - before <= _PIN_MAX


@pytest.mark.parametrize(
    "spelling",
    [
        "relative/dir",  # relative: it would depend on the working directory
        "{t}/a/../b",  # not normalized: ".." is a walk, not a name
        "{t}/a//b",
        "{t}/a/./b",
        "{t}/a/b/",
        "/",  # the root itself: every walk starts there anyway
    ],
)
def test_only_absolute_normalized_paths_are_pinned(tmp_path: Path, spelling: str) -> None:
    from kexpr.spool import fsio

    p = spelling.format(t=tmp_path)
    before = dict(fsio._pins)
    fsio.pin_ancestor(p)  # type: ignore[arg-type]  # the raw spelling (a Path would normalize it)
    assert fsio._pins == before
