//! The system calls of the switch's threads, in one place: eventfds for wake-ups, ppoll for
//! sleeping, CPU pinning, timer slack, thread ids and clock ticks. Each `unsafe` block names its
//! invariant; everything else in the switch calls these safe wrappers.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A non-blocking, close-on-exec eventfd.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the result is checked before use.
    let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Adds one to eventfd `fd` (wakes whoever polls it). A full counter or a closed descriptor is
/// ignored: the sleeper wakes anyway or is gone.
pub(crate) fn signal(fd: &impl AsRawFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes from a live array to a descriptor the caller keeps open.
    let _ = unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), 8) };
}

/// Resets eventfd `fd` to zero.
pub(crate) fn drain(fd: &impl AsRawFd) {
    let mut b = [0u8; 8];
    // SAFETY: reads at most 8 bytes into a live array from a descriptor the caller keeps open.
    let _ = unsafe { libc::read(fd.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
}

/// Sleeps until one of `fds` is ready or `timeout_ns` passes (signals do not interrupt the
/// caller's logic: it simply runs another loop).
pub(crate) fn ppoll(fds: &mut [libc::pollfd], timeout_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `fds` is a live array of `fds.len()` pollfd entries and `ts` a live timespec.
    let _ = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
}

/// Pins the calling thread to CPU `cpu`.
pub(crate) fn pin_to_cpu(cpu: usize) {
    // SAFETY: `set` is a plain bit set initialised by CPU_ZERO; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu % libc::CPU_SETSIZE as usize, &mut set);
        let _ = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Sets the calling thread's timer slack (how late the kernel may fire its timers), ns.
pub(crate) fn set_timer_slack_ns(ns: u64) {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}

/// Puts the calling thread in `SCHED_FIFO` at `priority` (1-99).
pub(crate) fn set_fifo(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param that outlives the call; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's kernel id.
pub(crate) fn gettid() -> libc::pid_t {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// Clock ticks per second, the unit of /proc CPU times.
pub(crate) fn clock_ticks_per_sec() -> f64 {
    // SAFETY: sysconf with a constant argument.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
}

/// The user id of the process at the other end of connected Unix socket `fd` (SO_PEERCRED: the
/// credentials it had when it connected).
pub(crate) fn peer_uid(fd: &impl AsRawFd) -> io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, a live ucred of that size, and
    // stores the length it wrote in `len`; `fd` is kept open by the caller.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != std::mem::size_of::<libc::ucred>() {
        return Err(io::Error::other("short SO_PEERCRED answer"));
    }
    Ok(cred.uid)
}

/// The effective user id of this process.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}
