"""Layer 2: the worker locks itself down, so that even a snippet that escaped layer 1 cannot harm
the machine. Linux only; every mechanism that the kernel or the installation lacks is reported
as unavailable (the parent warns once), the others still apply.

Two steps, because Landlock only binds the calling thread and the threads it creates later:
`before_import` runs while the worker is still single-threaded (rlimits, no_new_privs, a network
namespace, Landlock); `after_import` runs once TensorFlow is loaded, before any snippet (descriptor
limit, capabilities dropped, seccomp synchronised onto every thread TensorFlow started).

Landlock is driven by its three syscalls through ctypes: the kernel ABI is stable and small, and
the only PyPI binding is a pre-release. seccomp goes through `pyseccomp` (ctypes over the system's
libseccomp, API-compatible with libseccomp's own Python bindings), installed by the `verify` extra.
"""
from __future__ import annotations

import ctypes
import errno
import os
import resource
import sys
import sysconfig
from typing import Dict, Iterable, List

LAYERS = ("rlimits", "no_new_privs", "network namespace", "landlock", "capabilities dropped", "seccomp")
FILE_SIZE_LIMIT = 64 * 1024 ** 2  # the worker's own log is the only file it may grow
OPEN_FILES_LIMIT = 512

_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_SYS_CAPSET = 126
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP = 38, 24
_CLONE_NEWUSER, _CLONE_NEWNET, _CLONE_THREAD = 0x10000000, 0x40000000, 0x00010000

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

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


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


def before_import(folder: str, memory: int, report: Dict[str, str]) -> None:
    """Everything that must hold for the threads TensorFlow is about to start. pyseccomp is
    imported here: it finds libseccomp by running `ldconfig`, which Landlock will forbid."""
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, OSError, RuntimeError):
        pass  # reported by the seccomp step
    _step(report, "rlimits", lambda: _limits(memory))
    _step(report, "no_new_privs", lambda: _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl"))
    _step(report, "network namespace", _network_namespace)
    _step(report, "landlock", lambda: _landlock(folder))


def after_import(report: Dict[str, str]) -> None:
    """Once TensorFlow is loaded: no more descriptors than it needs, no capabilities, seccomp."""
    _step(report, "capabilities dropped", _drop_capabilities)
    _step(report, "seccomp", _seccomp)


def _step(report: Dict[str, str], layer: str, action) -> None:
    try:
        action()
        report[layer] = "active"
    except (OSError, ImportError, RuntimeError, AttributeError) as err:
        report[layer] = f"unavailable: {err}"


def _limits(memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES_LIMIT, OPEN_FILES_LIMIT))


def _network_namespace() -> None:
    """An empty network namespace (only a down loopback): root unshares it directly; a user
    needs a user namespace around it, which only a single-threaded process may create."""
    flags = _CLONE_NEWNET if os.geteuid() == 0 else _CLONE_NEWUSER | _CLONE_NEWNET
    _check(_libc.unshare(flags), "unshare")


def _read_roots(folder: str) -> List[str]:
    """The Python installation (every import path, the standard library, site-packages, this
    package) and the system libraries, as real paths that exist."""
    paths = set(sys.path) | set(sysconfig.get_paths().values()) | {sys.prefix, sys.base_prefix}
    paths.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths |= set(_SYSTEM_READS) | {f"/proc/{os.getpid()}"}  # its own /proc entry, not the parent's
    found = {os.path.realpath(p) for p in paths if p and os.path.exists(p)}
    return sorted(p for p in found if p != os.path.realpath(folder))


def _landlock(folder: str) -> None:
    abi = _check(_libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, 0, 1), "landlock ABI")
    handled_fs = sum(bits for version, bits in _FS_BY_ABI.items() if version <= abi)
    attr = _RulesetAttr(handled_fs, _NET_TCP if abi >= 4 else 0, _SCOPES if abi >= 6 else 0)
    size = ctypes.sizeof(attr) if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _check(_libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0), "landlock ruleset")
    try:
        for path in _read_roots(folder):
            _allow(ruleset, path, _READ_FILE | (_READ_DIR if os.path.isdir(path) else 0))
        _allow(ruleset, folder, (_READ_FILE | _READ_DIR | _WRITE_IN_FOLDER) & handled_fs)
        _allow(ruleset, "/dev/null", _READ_FILE | _WRITE_FILE)
        _check(_libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock restrict")
    finally:
        os.close(ruleset)


def _allow(ruleset: int, path: str, access: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        rule = _PathBeneath(access, fd)
        _check(_libc.syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0), f"landlock rule {path}")
    finally:
        os.close(fd)


def _drop_capabilities() -> None:
    """No capability left (this matters when cliplint runs as root): bounding set, then the sets."""
    for capability in range(64):
        if _libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) < 0 and ctypes.get_errno() == errno.EINVAL:
            break  # past the last capability this kernel knows
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.syscall(_SYS_CAPSET, header, data), "capset")


# Denied with EPERM whatever their arguments: processes, namespaces, kernel interfaces, and every
# way to create, link, rename or remove a file.
_DENIED = (
    "execve", "execveat", "fork", "vfork", "tkill", "ptrace", "process_vm_readv", "process_vm_writev",
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "setsid", "setpgid",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "bpf", "perf_event_open",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "keyctl", "add_key",
    "request_key", "init_module", "finit_module", "delete_module", "kexec_load", "reboot", "swapon",
    "swapoff", "personality", "memfd_create", "open_by_handle_at", "name_to_handle_at", "creat",
    "mkdir", "mkdirat", "rename", "renameat", "renameat2", "unlink", "unlinkat", "rmdir", "link",
    "linkat", "symlink", "symlinkat", "mknod", "mknodat", "chmod", "fchmod", "fchmodat", "chown",
    "fchown", "lchown", "fchownat", "truncate", "utimes", "utimensat", "futimesat", "setxattr",
    "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "fanotify_init",
    "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "move_mount", "open_tree", "fsopen", "fsmount",
    "mount_setattr", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "capset",
    "setpriority", "ioprio_set", "process_madvise", "kcmp", "migrate_pages", "move_pages",
)
_WRITE_FLAGS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC)
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C


def _seccomp() -> None:
    import pyseccomp as seccomp

    denied = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in _DENIED:
        _add(rules, denied, name)
    # Threads only: a clone without CLONE_THREAD is a new process; clone3 hides its flags in
    # memory, so it says "not implemented" and the C library falls back to clone.
    rules.add_rule(denied, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, _CLONE_THREAD, 0))
    _add(rules, seccomp.ERRNO(errno.ENOSYS), "clone3")
    _add(rules, seccomp.ERRNO(errno.ENOSYS), "openat2")  # its flags are out of reach too
    for flag in _WRITE_FLAGS:  # no file is opened for writing, not even in the worker's folder
        rules.add_rule(denied, "open", seccomp.Arg(1, seccomp.MASKED_EQ, flag, flag))
        rules.add_rule(denied, "openat", seccomp.Arg(2, seccomp.MASKED_EQ, flag, flag))
    pid = os.getpid()  # signals to itself only (raise(), abort()); never the parent or others
    rules.add_rule(denied, "kill", seccomp.Arg(0, seccomp.NE, pid))
    rules.add_rule(denied, "tgkill", seccomp.Arg(0, seccomp.NE, pid))
    rules.add_rule(denied, "rt_sigqueueinfo", seccomp.Arg(0, seccomp.NE, pid))
    rules.add_rule(denied, "rt_tgsigqueueinfo", seccomp.Arg(0, seccomp.NE, pid))
    rules.add_rule(denied, "prlimit64", seccomp.Arg(2, seccomp.NE, 0))  # reading limits only, of anyone
    for request in (_TIOCSTI, _TIOCLINUX):
        rules.add_rule(denied, "ioctl", seccomp.Arg(1, seccomp.EQ, request))
    rules.set_attr(seccomp.Attr.CTL_TSYNC, 1)  # onto every thread TensorFlow already started
    rules.load()


def _add(rules, action, name: str) -> None:
    try:
        rules.add_rule(action, name)
    except (OSError, ValueError, RuntimeError):  # a syscall this architecture does not have
        pass


def layers_missing(report: Dict[str, str]) -> Iterable[str]:
    return [f"{layer} ({state[len('unavailable: '):]})" for layer, state in report.items() if state != "active"]
