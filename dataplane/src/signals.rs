//! Waiting for SIGINT / SIGTERM without a handler: the signals are blocked in every thread (call
//! [`block_termination`] before starting any) and the main thread collects them with sigwait.

fn termination_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        set
    }
}

/// Blocks SIGINT and SIGTERM in this thread and in the threads it starts afterwards.
pub fn block_termination() {
    let set = termination_set();
    // SAFETY: `set` is a valid initialised sigset_t; the old mask is not needed.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

/// Waits until SIGINT or SIGTERM arrives; returns the signal number.
pub fn wait_for_termination() -> i32 {
    let set = termination_set();
    let mut sig = 0;
    // SAFETY: `set` is a valid sigset_t and `sig` a live int for sigwait to write.
    unsafe { libc::sigwait(&set, &mut sig) };
    sig
}

/// Unblocks SIGINT and SIGTERM in this thread (and the threads it starts afterwards): for a
/// process whose parent had them blocked, since exec keeps the signal mask, so that they end it.
pub fn unblock_termination() {
    let set = termination_set();
    // SAFETY: `set` is a valid initialised sigset_t; the old mask is not needed.
    unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
}
