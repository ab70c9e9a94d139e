"""Layer 2: the worker locks itself down, so that even a snippet that escaped layer 1 cannot harm
the machine. Linux only; every mechanism that the kernel or the installation lacks is reported
as unavailable, and then `--verify` runs no snippet unless the user passes --verify-unsandboxed.

Two steps, because Landlock and capabilities only bind the calling thread and the threads it
creates later: `before_import` runs while the worker is still single-threaded (rlimits,
no_new_privs, a network namespace, the switch to an unprivileged user when started as root,
capabilities dropped, Landlock); `after_import` loads seccomp once TensorFlow is loaded, before any
snippet, synchronised onto every thread TensorFlow started. seccomp is an allowlist of the calls
the worker makes after that point, measured by `bench/seccomp_syscalls.py`.

Landlock and the mounts are driven by their syscalls through ctypes: the kernel ABI is stable and
small, and the only PyPI binding for Landlock is a pre-release. seccomp goes through `pyseccomp`
(ctypes over the system's libseccomp, API-compatible with libseccomp's own Python bindings),
installed by the `verify` extra.
"""
from __future__ import annotations

import ctypes
import errno
import os
import signal
import stat
import sys
import sysconfig
from functools import lru_cache
from typing import Callable, Dict, FrozenSet, Iterable, List

LAYERS = ("rlimits", "no_new_privs", "network namespace", "unprivileged user", "capabilities dropped",
          "landlock", "seccomp")
FILE_SIZE_LIMIT = 64 * 1024 ** 2  # the worker's own log is the only file it may grow
OPEN_FILES_LIMIT = 512
UNPRIVILEGED = 65534  # nobody / nogroup: the user and group a worker started as root runs as
TEST_ONLY_OFF = "unavailable: switched off by the test-only hook"

_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_CAPSET = 428, 429, 126
_PR_SET_PDEATHSIG, _PR_CAPBSET_READ, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 1, 23, 24, 38
_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWNET, _CLONE_THREAD = 0x00020000, 0x10000000, 0x40000000, 0x00010000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
_OPEN_TREE_CLONE, _AT_RECURSIVE, _MOVE_MOUNT_F_EMPTY_PATH, _AT_FDCWD = 1, 0x8000, 4, -100

# Landlock access rights (uapi/linux/landlock.h), grouped by the ABI version that added them.
_FS_BY_ABI = {1: (1 << 13) - 1, 2: 1 << 13, 3: 1 << 14, 4: 0, 5: 1 << 15}
_READ_FILE, _READ_DIR, _WRITE_FILE = 1 << 2, 1 << 3, 1 << 1
_WRITE_IN_FOLDER = _WRITE_FILE | (1 << 4) | (1 << 5) | (1 << 7) | (1 << 8) | (1 << 14)  # rm, mkdir, mkreg, truncate
_NET_TCP = (1 << 0) | (1 << 1)  # bind and connect: handled and never allowed
_SCOPES = (1 << 0) | (1 << 1)  # abstract unix sockets and signals of processes outside the sandbox

# Read-only beyond the Python installation: shared libraries and what TensorFlow reads of the machine.
_SYSTEM_READS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib", "/etc/ld.so.cache",
                 "/dev/urandom", "/proc/cpuinfo", "/proc/meminfo", "/sys/devices/system", "/sys/bus/cpu",
                 "/sys/bus/node", "/sys/fs/cgroup")
_PARENT = {"pid": 0}  # the cliplint process the worker dies with


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    if sys.platform != "linux":
        raise OSError(errno.ENOSYS, f"not Linux ({sys.platform})")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    return libc


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def scrubbed_environment(folder: str) -> Dict[str, str]:
    """The worker's whole environment: none of the user's variables, only what selects the
    Keras flavour and keeps TensorFlow quiet; HOME and TMPDIR point into the worker's folder."""
    keep = {name: os.environ[name] for name in ("TF_USE_LEGACY_KERAS",) if name in os.environ}
    return {**keep, "HOME": folder, "TMPDIR": folder, "KERAS_HOME": folder, "LANG": "C.UTF-8",
            "CUDA_VISIBLE_DEVICES": "-1", "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "PYTHONNOUSERSITE": "1"}


def platform_missing() -> Dict[str, str]:
    """What the parent knows without starting a worker: off Linux, every layer but the rlimits."""
    if sys.platform == "linux":
        return {}
    return {layer: f"unavailable: not Linux ({sys.platform})" for layer in LAYERS if layer != "rlimits"}


def die_with_parent() -> None:
    """The worker is killed when cliplint dies (armed again after a change of user, which clears it)."""
    _PARENT["pid"] = _PARENT["pid"] or os.getppid()
    _check(_libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
    if os.getppid() != _PARENT["pid"]:
        os._exit(1)  # cliplint died before the signal was armed


def before_import(folder: str, memory: int, report: Dict[str, str], off: FrozenSet[str] = frozenset()) -> None:
    """Everything that must hold for the threads TensorFlow is about to start. pyseccomp is
    imported here: it finds libseccomp by running `ldconfig`, which Landlock will forbid. `off`:
    layers the test-only hook switches off (the parent passes it only while pytest runs)."""
    os.umask(0o022)  # the folders made for the unprivileged user's view must be traversable
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, OSError, RuntimeError) as err:
        report["seccomp"] = f"unavailable: {err}"
    _step(report, off, "rlimits", lambda: _limits(memory))
    _step(report, off, "no_new_privs", lambda: _check(_libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl"))
    _step(report, off, "network namespace", _network_namespace)
    _step(report, off, "unprivileged user", lambda: _unprivileged_user(folder))
    _step(report, off, "capabilities dropped", _drop_capabilities)
    _step(report, off, "landlock", lambda: _landlock(folder))
    if "seccomp" in off:
        report["seccomp"] = TEST_ONLY_OFF


def after_import(report: Dict[str, str]) -> None:
    """Once TensorFlow is loaded, before any snippet: the seccomp allowlist."""
    if "seccomp" not in report:
        _step(report, frozenset(), "seccomp", _seccomp)


def _step(report: Dict[str, str], off: FrozenSet[str], layer: str, action: Callable[[], object]) -> None:
    if layer in off:
        report[layer] = TEST_ONLY_OFF
        return
    try:
        action()
        report[layer] = "active"
    except (OSError, ImportError, RuntimeError, AttributeError, ValueError) as err:
        report[layer] = f"unavailable: {err}"


def _limits(memory: int) -> None:
    import resource  # not on Windows

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES_LIMIT, OPEN_FILES_LIMIT))


def _network_namespace() -> None:
    """An empty network namespace (only a down loopback): root unshares it directly; a user
    needs a user namespace around it, which only a single-threaded process may create."""
    flags = _CLONE_NEWNET if os.geteuid() == 0 else _CLONE_NEWUSER | _CLONE_NEWNET
    _check(_libc().unshare(flags), "unshare")


# --- the unprivileged user ---------------------------------------------------------------------
# Started as root, the worker would own every root-owned file: it could change their mode, times,
# owner and extended attributes, which Landlock does not cover. It becomes nobody (65534) before
# TensorFlow is imported. The Python installation may sit where nobody cannot go (pyenv under
# /root, mode 0700): then, in a mount namespace of its own (private, so nothing propagates to the
# machine), each folder on the way that nobody cannot traverse is covered by an empty tmpfs
# (mode 0755) in which the installation's folders are mounted again at their own paths. Everything
# else in that folder stays out of sight, and lazy imports (Keras imports modules on first use)
# keep working. Its own temporary folder (0700, made by cliplint) becomes nobody's. A worker that
# does not start as root is unprivileged already.

def _unprivileged_user(folder: str) -> None:
    if os.geteuid() != 0:
        return
    _expose([*_read_roots(folder), os.path.realpath(folder)])  # its folder may be below a 0700 one too
    os.chown(folder, UNPRIVILEGED, UNPRIVILEGED)  # its TMPDIR and HOME: TensorFlow's import writes there
    _drop_bounding_set()  # needs CAP_SETPCAP: before the change of user clears every capability
    os.setgroups([])
    os.setresgid(UNPRIVILEGED, UNPRIVILEGED, UNPRIVILEGED)
    os.setresuid(UNPRIVILEGED, UNPRIVILEGED, UNPRIVILEGED)
    die_with_parent()
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise OSError(errno.EPERM, "the worker could become root again")


def _expose(roots: List[str]) -> None:
    """Make every read root reachable by the unprivileged user (see above); a folder within an
    exposed root that blocks it again is handled in the next round."""
    for round_ in range(8):
        blocked: Dict[str, List[str]] = {}
        for root in roots:
            ancestor = _blocked_ancestor(root)
            if ancestor:
                blocked.setdefault(ancestor, []).append(root)
        if not blocked:
            return
        if round_ == 0:  # a mount namespace only when needed (a container may forbid it)
            _check(_libc().unshare(_CLONE_NEWNS), "unshare mount namespace")
            _check(_libc().mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "mount private")
        for ancestor, under in blocked.items():
            _cover(ancestor, under)
    raise OSError(errno.ELOOP, "the Python installation stays out of the unprivileged user's reach")


def _blocked_ancestor(path: str) -> str:
    """The outermost folder above `path` that the unprivileged user may not traverse, or ''."""
    parts = path.strip("/").split("/")[:-1]
    for depth in range(len(parts) + 1):
        ancestor = "/" + "/".join(parts[:depth])
        info = os.stat(ancestor)
        bit = stat.S_IXUSR if info.st_uid == UNPRIVILEGED else stat.S_IXGRP if info.st_gid == UNPRIVILEGED \
            else stat.S_IXOTH
        if not info.st_mode & bit:
            return ancestor
    return ""


def _cover(ancestor: str, roots: List[str]) -> None:
    """An empty tmpfs over `ancestor`, with the outermost of `roots` mounted again at their paths."""
    libc = _libc()
    outermost = [r for r in roots if not any(r != o and r.startswith(o.rstrip("/") + "/") for o in roots)]
    flags = _OPEN_TREE_CLONE | _AT_RECURSIVE | os.O_CLOEXEC
    clones = [(root, os.path.isdir(root),
               _check(libc.syscall(_SYS_OPEN_TREE, _AT_FDCWD, root.encode(), flags), f"open_tree {root}"))
              for root in outermost]
    try:
        _check(libc.mount(b"tmpfs", ancestor.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                          b"mode=0755,size=1m"), f"mount tmpfs on {ancestor}")
        for root, folder, tree in clones:
            _mount_point(root, folder)
            _check(libc.syscall(_SYS_MOVE_MOUNT, tree, b"", _AT_FDCWD, root.encode(), _MOVE_MOUNT_F_EMPTY_PATH),
                   f"move_mount {root}")
    finally:
        for _, _, tree in clones:
            os.close(tree)


def _mount_point(path: str, folder: bool) -> None:
    if folder:
        os.makedirs(path, mode=0o755, exist_ok=True)
        return
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))


def _read_roots(folder: str) -> List[str]:
    """The Python installation (every import path, the standard library, site-packages, this
    package) and the system libraries, as real paths that exist."""
    paths = set(sys.path) | set(sysconfig.get_paths().values()) | {sys.prefix, sys.base_prefix}
    paths.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths |= set(_SYSTEM_READS) | {f"/proc/{os.getpid()}"}  # its own /proc entry, not the parent's
    found = {os.path.realpath(p) for p in paths if p and os.path.exists(p)}
    return sorted(p for p in found if p != os.path.realpath(folder))


def _landlock(folder: str) -> None:
    libc = _libc()
    abi = _check(libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, 0, 1), "landlock ABI")
    handled_fs = sum(bits for version, bits in _FS_BY_ABI.items() if version <= abi)
    attr = _RulesetAttr(handled_fs, _NET_TCP if abi >= 4 else 0, _SCOPES if abi >= 6 else 0)
    size = ctypes.sizeof(attr) if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _check(libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0), "landlock ruleset")
    try:
        for path in _read_roots(folder):
            _allow(ruleset, path, _READ_FILE | (_READ_DIR if os.path.isdir(path) else 0))
        _allow(ruleset, folder, (_READ_FILE | _READ_DIR | _WRITE_IN_FOLDER) & handled_fs)
        _allow(ruleset, "/dev/null", _READ_FILE | _WRITE_FILE)
        _check(libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock restrict")
    finally:
        os.close(ruleset)


def _allow(ruleset: int, path: str, access: int) -> None:
    """A rule for `path`; a path the worker cannot reach (its folder, once it is nobody) gets none,
    which only takes rights away."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except PermissionError:
        return
    try:
        rule = _PathBeneath(access, fd)
        _check(_libc().syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0), f"landlock rule {path}")
    finally:
        os.close(fd)


def _drop_bounding_set() -> None:
    libc = _libc()
    for capability in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) < 0 and ctypes.get_errno() == errno.EINVAL:
            break  # past the last capability this kernel knows


def _drop_capabilities() -> None:
    """No capability left, in the bounding set and in the thread's sets (this matters when cliplint
    runs as root and the change of user is unavailable, or in a user namespace)."""
    libc = _libc()
    _drop_bounding_set()
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    _check(libc.syscall(_SYS_CAPSET, header, data), "capset")
    if any(libc.prctl(_PR_CAPBSET_READ, capability, 0, 0, 0) == 1 for capability in range(64)):
        raise OSError(errno.EPERM, "a capability is left in the bounding set")


# --- seccomp: an allowlist --------------------------------------------------------------------
# The calls the worker makes once the filter is loaded, measured by bench/seccomp_syscalls.py over
# every probe in both Keras flavours (regenerate the list with it when TensorFlow changes).
_MEASURED = (
    "access", "arch_prctl", "brk", "clock_nanosleep", "close", "exit", "faccessat2", "futex", "getdents64",
    "getpid", "getrandom", "gettid", "lseek", "madvise", "mmap", "mprotect", "munmap", "newfstatat", "read",
    "readlink", "rseq", "rt_sigprocmask", "sched_getaffinity", "sched_getparam", "sched_getscheduler",
    "sched_yield", "set_robust_list", "sysinfo", "uname", "write",
)
# The same calls as other C libraries spell them, and what every process needs although a run may
# not show it (returning from a signal handler, exiting, clocks): none reaches outside the process
# or changes a file.
_EQUIVALENTS = (
    "faccessat", "stat", "lstat", "fstat", "statx", "readlinkat", "getdents", "nanosleep", "clock_gettime",
    "clock_getres", "gettimeofday", "time", "pread64", "readv", "preadv", "writev", "mremap", "exit_group",
    "rt_sigaction", "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait", "sigaltstack", "restart_syscall",
    "getcwd", "poll", "ppoll", "getrusage", "getuid", "geteuid", "getgid", "getegid", "getrlimit",
    "sched_get_priority_max", "sched_get_priority_min",
)
ALLOWED_SYSCALLS = _MEASURED + _EQUIVALENTS
# Allowed only with the arguments below (every other use is refused).
FILTERED_SYSCALLS = ("clone", "open", "openat", "kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
                     "prlimit64", "ioctl", "fcntl", "prctl")
# "Not implemented", so that the C library falls back to a call the filter can check: clone3 and
# openat2 hide their flags in memory, which a filter cannot read.
NOT_IMPLEMENTED = ("clone3", "openat2")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC
_IOCTLS = (0x5401, 0x5413, 0x5421, 0x5450, 0x5451)  # TCGETS, TIOCGWINSZ, FIONBIO, FIONCLEX, FIOCLEX
_FCNTLS = (0, 1, 2, 3, 4, 1030)  # F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC
_PRCTLS = (15, 16, 0x53564D41)  # PR_SET_NAME, PR_GET_NAME, PR_SET_VMA (naming its own threads and memory)


def _seccomp() -> None:
    """Anything not allowed fails with EPERM rather than killing the worker: a call the measurement
    did not see (another C library, a rare path in TensorFlow, an optional feature probed) then
    fails like a permission error, which TensorFlow and Python handle, instead of turning the verdict
    into a crash; refused, it does nothing either way. 32-bit and x32 calls kill the worker
    (libseccomp's bad-architecture action)."""
    import pyseccomp as seccomp

    allow, pid = seccomp.ALLOW, os.getpid()
    rules = seccomp.SyscallFilter(seccomp.ERRNO(errno.EPERM))
    for name in ALLOWED_SYSCALLS:
        _add(rules, allow, name)
    for name in NOT_IMPLEMENTED:
        _add(rules, seccomp.ERRNO(errno.ENOSYS), name)
    rules.add_rule(allow, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, _CLONE_THREAD, _CLONE_THREAD))  # threads only
    _add(rules, allow, "open", seccomp.Arg(1, seccomp.MASKED_EQ, _WRITE_FLAGS, 0))  # never for writing
    rules.add_rule(allow, "openat", seccomp.Arg(2, seccomp.MASKED_EQ, _WRITE_FLAGS, 0))
    for name in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):  # signals to itself only
        rules.add_rule(allow, name, seccomp.Arg(0, seccomp.EQ, pid))
    for target in (0, pid):  # its own limits only
        rules.add_rule(allow, "prlimit64", seccomp.Arg(0, seccomp.EQ, target))
    for name, index, values in (("ioctl", 1, _IOCTLS), ("fcntl", 1, _FCNTLS), ("prctl", 0, _PRCTLS)):
        for value in values:
            rules.add_rule(allow, name, seccomp.Arg(index, seccomp.EQ, value))
    rules.set_attr(seccomp.Attr.CTL_TSYNC, 1)  # onto every thread TensorFlow already started
    rules.load()


def _add(rules, action, name: str, *arguments) -> None:
    try:
        rules.add_rule(action, name, *arguments)
    except (OSError, ValueError, RuntimeError):  # a syscall this architecture does not have
        pass


def layers_missing(report: Dict[str, str]) -> Iterable[str]:
    return [f"{layer} ({state[len('unavailable: '):]})" for layer, state in report.items() if state != "active"]
