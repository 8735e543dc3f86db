//! dw-traffic's integration tests, one binary (`cargo test -p dw-traffic --test it`): each
//! former `tests/*.rs` file is a module here, so the crate's tests compile and link once.
//! No test relies on being alone in its process: none sets an environment variable, the
//! current directory, a signal handler or a process-wide once-cell.

mod bounds;
mod busy;
mod protocol;
mod users;
mod versions;
