//! Reading a mapped snapshot that someone truncates meanwhile, without dying of SIGBUS.
//!
//! The snapshot is read through an mmap. dw-agent only ever renames a new file over the old
//! one, and a mapping of a renamed-away file stays valid. But a file truncated in place
//! (`cp new.json /run/dw-router/routing.json`, an editor, a careless script) takes its pages
//! away from every mapping, and the next read of one raises SIGBUS: by default that kills
//! the worker, and every worker of the node reads the file at the same moment.
//!
//! [`read_guarded`] runs a read of a mapping with a SIGBUS handler armed for that mapping's
//! address range on the current thread. A fault inside the range is answered by mapping a
//! page of zeros over the missing page and noting the fault; the read then finishes on
//! meaningless bytes, and its result is thrown away: the load fails and the last good table
//! stays, as for any unreadable file. The next inotify event (the writer finishing) or
//! poll brings the complete file in. No jump out of the handler, so no Rust frame is ever
//! skipped.
//!
//! The handler is installed on the first guarded read (in MINIT when `preload` reads the
//! snapshot there), and only once per process (forks inherit it). A SIGBUS anywhere else goes to whatever handler was there
//! before, or to the default action, exactly as without this module.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, compiler_fence};

// The address range [start, end) being read on this thread (0, 0 when none), and whether a
// fault hit it. Const-initialised, destructor-free thread locals are plain TLS accesses,
// safe in a handler; atomics with compiler fences, so that the compiler neither keeps
// them in registers across the read nor moves the read across them.
thread_local! {
    static GUARD_START: AtomicUsize = const { AtomicUsize::new(0) };
    static GUARD_END: AtomicUsize = const { AtomicUsize::new(0) };
    static FAULTED: AtomicBool = const { AtomicBool::new(false) };
}

/// The SIGBUS disposition found when the handler was installed; `None` if installing failed.
static PREVIOUS: OnceLock<Option<libc::sigaction>> = OnceLock::new();

/// The read hit a page the file no longer has: it was truncated while being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncated;

/// Runs `read` over `bytes` (a file mapping) with SIGBUS inside `bytes` caught.
/// `Err(Truncated)` when a page of it vanished meanwhile; then `read`'s result is dropped.
pub fn read_guarded<T>(bytes: &[u8], read: impl FnOnce(&[u8]) -> T) -> Result<T, Truncated> {
    if PREVIOUS.get_or_init(install).is_none() {
        // No handler (sigaction failed): read unguarded, as before this module existed.
        return Ok(read(bytes));
    }
    let start = bytes.as_ptr() as usize;
    FAULTED.with(|faulted| faulted.store(false, Ordering::Relaxed));
    GUARD_START.with(|guard| guard.store(start, Ordering::Relaxed));
    GUARD_END.with(|guard| guard.store(start + bytes.len(), Ordering::Relaxed));
    compiler_fence(Ordering::SeqCst);
    let result = read(bytes);
    compiler_fence(Ordering::SeqCst);
    GUARD_END.with(|guard| guard.store(0, Ordering::Relaxed));
    GUARD_START.with(|guard| guard.store(0, Ordering::Relaxed));
    if FAULTED.with(|faulted| faulted.load(Ordering::Relaxed)) {
        return Err(Truncated);
    }
    Ok(result)
}

fn install() -> Option<libc::sigaction> {
    // SAFETY: plain sigaction calls with zeroed, then filled, structs.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as *const () as usize;
        // SA_ONSTACK: a thread with an alternate signal stack keeps using it.
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        let mut previous: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(libc::SIGBUS, &action, &mut previous) == 0).then_some(previous)
    }
}

extern "C" fn on_sigbus(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
    let address = unsafe { (*info).si_addr() } as usize;
    let start = GUARD_START.with(|guard| guard.load(Ordering::Relaxed));
    let end = GUARD_END.with(|guard| guard.load(Ordering::Relaxed));
    if start <= address && address < end && patch_with_zeros(address) {
        FAULTED.with(|faulted| faulted.store(true, Ordering::Relaxed));
        // Returning re-runs the faulting read, which now finds the zero page.
        return;
    }
    pass_on(signal, info, context);
}

/// Maps a private page of zeros over the page holding `address`. mmap is a plain system
/// call, safe to make in a signal handler on Linux.
fn patch_with_zeros(address: usize) -> bool {
    // SAFETY: sysconf has no preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        size if size > 0 => size as usize,
        _ => return false,
    };
    let page_start = address & !(page - 1);
    // SAFETY: the page lies inside a read-only file mapping that this thread is reading
    // and that stays mapped until the read ends; replacing it with zeros changes what the
    // read sees, never what anyone else owns. The whole mapping is unmapped as one later.
    let mapped = unsafe {
        libc::mmap(
            page_start as *mut libc::c_void,
            page,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            -1,
            0,
        )
    };
    mapped != libc::MAP_FAILED
}

/// A SIGBUS that is not ours: what the process would have done without this module.
fn pass_on(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let Some(Some(previous)) = PREVIOUS.get() else {
        return reset_to_default(signal);
    };
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // A hardware fault cannot be ignored: returning re-runs the faulting access, which
        // then takes the default action (the process dies, as it always would have).
        return reset_to_default(signal);
    }
    // SAFETY: `handler` is the function that was installed for SIGBUS before us, called
    // with the arguments its flags say it takes.
    unsafe {
        if previous.sa_flags & libc::SA_SIGINFO != 0 {
            let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(handler);
            handler(signal, info, context);
        } else {
            let handler: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
            handler(signal);
        }
    }
}

fn reset_to_default(signal: libc::c_int) {
    // SAFETY: restoring the default disposition; sigaction is async-signal-safe.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut());
    }
}
