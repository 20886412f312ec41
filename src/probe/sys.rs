//! The only `unsafe` in cyclix: a handful of raw syscalls the probe suite needs and for which
//! neither `std` nor `nix` has a safe wrapper (security-cases §0.2: a syscall is called with a
//! bad fd or pointer, so an *allowed* call fails harmlessly with `EBADF`/`EFAULT`/`ESRCH` and a
//! *filtered* one with `EPERM`/`ENOSYS`; bubblewrap `tests/try-syscall.c`).
//!
//! Every function returns `Ok(return value)` or `Err(errno)` (a positive `errno` number).
#![allow(unsafe_code)]

/// A syscall tried with arguments that cannot do anything when it is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryCall {
    /// `kexec_load(0, 0, NULL, 0)`.
    KexecLoad,
    /// `bpf(BPF_PROG_LOAD, NULL, 0)`.
    Bpf,
    /// `perf_event_open(NULL, 0, -1, -1, 0)`.
    PerfEventOpen,
    /// `init_module(NULL, 0, NULL)`.
    InitModule,
    /// `finit_module(-1, NULL, 0)`.
    FinitModule,
    /// `open_by_handle_at(-1, NULL, 0)`.
    OpenByHandleAt,
    /// `ptrace(PTRACE_ATTACH, -1, NULL, NULL)`.
    PtraceAttach,
    /// `setns(-1, 0)`.
    Setns,
    /// `userfaultfd(0)`; a returned fd is closed at once.
    Userfaultfd,
    /// Syscall number 999, which no Linux architecture defines.
    Unknown,
}

impl TryCall {
    /// Every call, in report order.
    pub const ALL: [TryCall; 10] = [
        TryCall::KexecLoad,
        TryCall::Bpf,
        TryCall::PerfEventOpen,
        TryCall::InitModule,
        TryCall::FinitModule,
        TryCall::OpenByHandleAt,
        TryCall::PtraceAttach,
        TryCall::Setns,
        TryCall::Userfaultfd,
        TryCall::Unknown,
    ];

    /// The syscall's name as in syscalls(2) (`unknown(999)` for the unknown number).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            TryCall::KexecLoad => "kexec_load",
            TryCall::Bpf => "bpf",
            TryCall::PerfEventOpen => "perf_event_open",
            TryCall::InitModule => "init_module",
            TryCall::FinitModule => "finit_module",
            TryCall::OpenByHandleAt => "open_by_handle_at",
            TryCall::PtraceAttach => "ptrace",
            TryCall::Setns => "setns",
            TryCall::Userfaultfd => "userfaultfd",
            TryCall::Unknown => "unknown(999)",
        }
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn ret(r: libc::c_long) -> Result<i64, i32> {
    if r < 0 { Err(errno()) } else { Ok(r) }
}

/// Makes the call with its harmless arguments.
///
/// # Errors
/// The call's `errno`.
pub fn try_call(call: TryCall) -> Result<i64, i32> {
    let null = std::ptr::null::<libc::c_void>();
    // SAFETY (all arms): every pointer argument is NULL and every fd is -1, so the kernel
    // either rejects the call (EFAULT/EBADF/EPERM/ENOSYS/...) or, for userfaultfd, returns a
    // new fd that we own and close below. No memory of this process is read or written.
    let r = unsafe {
        match call {
            TryCall::KexecLoad => libc::syscall(libc::SYS_kexec_load, 0, 0, null, 0),
            TryCall::Bpf => libc::syscall(libc::SYS_bpf, 5, null, 0),
            TryCall::PerfEventOpen => libc::syscall(libc::SYS_perf_event_open, null, 0, -1, -1, 0),
            TryCall::InitModule => libc::syscall(libc::SYS_init_module, null, 0, null),
            TryCall::FinitModule => libc::syscall(libc::SYS_finit_module, -1, null, 0),
            TryCall::OpenByHandleAt => libc::syscall(libc::SYS_open_by_handle_at, -1, null, 0),
            TryCall::PtraceAttach => {
                libc::syscall(libc::SYS_ptrace, libc::PTRACE_ATTACH, -1, null, null)
            }
            TryCall::Setns => libc::syscall(libc::SYS_setns, -1, 0),
            TryCall::Userfaultfd => libc::syscall(libc::SYS_userfaultfd, 0),
            TryCall::Unknown => libc::syscall(999),
        }
    };
    let r = ret(r)?;
    if let (TryCall::Userfaultfd, Ok(fd)) = (call, i32::try_from(r)) {
        // SAFETY: `fd` was just returned to us by userfaultfd(2) and is used nowhere else.
        unsafe { libc::close(fd) };
    }
    Ok(r)
}

/// `syslog(SYSLOG_ACTION_READ_ALL, buf, len)` (what `dmesg` does): the number of bytes read.
///
/// # Errors
/// The call's `errno` (`EPERM` with `kernel.dmesg_restrict=1` and no `CAP_SYSLOG`).
pub fn syslog_read_all(buf: &mut [u8]) -> Result<i64, i32> {
    let len = libc::c_long::try_from(buf.len()).unwrap_or(libc::c_long::MAX);
    // SAFETY: the kernel writes at most `len` bytes into `buf`, which we own mutably for the
    // duration of the call.
    ret(unsafe { libc::syscall(libc::SYS_syslog, 3, buf.as_mut_ptr(), len) })
}

/// `keyctl(KEYCTL_READ, keyring, buf, len)`: the size of the keyring's payload (4 bytes per
/// linked key). `keyring` is a special id such as `KEY_SPEC_SESSION_KEYRING` (-3).
///
/// # Errors
/// The call's `errno`.
pub fn keyctl_read(keyring: i32, buf: &mut [u8]) -> Result<i64, i32> {
    let len = libc::c_long::try_from(buf.len()).unwrap_or(libc::c_long::MAX);
    // SAFETY: KEYCTL_READ (11) writes at most `len` bytes into `buf`, which we own mutably.
    ret(unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            11,
            libc::c_long::from(keyring),
            buf.as_mut_ptr(),
            len,
        )
    })
}

/// `keyctl(KEYCTL_DESCRIBE, key, buf, len)`: the key's description
/// (`type;uid;gid;perm;description`), NUL-terminated in `buf`; returns its full length.
///
/// # Errors
/// The call's `errno`.
pub fn keyctl_describe(key: i32, buf: &mut [u8]) -> Result<i64, i32> {
    let len = libc::c_long::try_from(buf.len()).unwrap_or(libc::c_long::MAX);
    // SAFETY: KEYCTL_DESCRIBE (6) writes at most `len` bytes into `buf`, which we own mutably.
    ret(unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            6,
            libc::c_long::from(key),
            buf.as_mut_ptr(),
            len,
        )
    })
}

/// `prctl(PR_GET_DUMPABLE)`: 0 (`SUID_DUMP_DISABLE`), 1 (`SUID_DUMP_USER`: its owner may
/// ptrace it and read `/proc/PID/mem`, `environ`, `fd`) or 2 (`SUID_DUMP_ROOT`); prctl(2).
/// `nix::sys::prctl::get_dumpable` folds 2 into `true`, which would misreport a process that
/// an unprivileged peer cannot trace.
///
/// # Errors
/// The errno of prctl (none is documented for this option).
pub fn get_dumpable() -> Result<i64, i32> {
    // SAFETY: PR_GET_DUMPABLE takes no pointer arguments.
    ret(libc::c_long::from(unsafe {
        libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0)
    }))
}
