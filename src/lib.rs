//! git-tabellio: runs, checkpoints and validation evidence kept inside git, and promotion of
//! exactly-validated commits.
//!
//! The library does the work and returns typed outcomes; it never prints. `main.rs` parses the
//! command line, calls in here and renders the result. Arrows go one way:
//! cli → lifecycle → store/model.
//!
//! `unsafe` code lives in [`sys`] alone; everywhere else the compiler refuses it.

#![deny(unsafe_code)]

pub mod demo;
pub mod error;
pub mod evidence;
pub mod export;
pub mod harness;
pub mod model;
pub mod store;

pub use error::{Error, ErrorKind, Result};
pub mod hooks;
pub mod lifecycle;
pub mod plans;
pub mod report;
pub mod run;
pub mod runner;
pub mod sync;
#[allow(unsafe_code)]
pub mod sys;
pub mod trust;
pub mod verify;

#[cfg(test)]
mod tests {
    /// On Linux with glibc, `build.rs` links GCC's unwinder into the binaries instead of loading
    /// `libgcc_s`: a panic must still unwind through frames, running their destructors, and a
    /// backtrace must still walk the stack.
    #[test]
    fn unwinding() {
        struct SetOnDrop<'a>(&'a std::cell::Cell<bool>);
        impl Drop for SetOnDrop<'_> {
            fn drop(&mut self) {
                self.0.set(true);
            }
        }
        let dropped = std::cell::Cell::new(false);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _guard = SetOnDrop(&dropped);
            // Unwinds like a panic, without printing one.
            std::panic::resume_unwind(Box::new("on purpose"))
        }));
        let payload = caught.expect_err("the unwind is caught");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"on purpose"));
        assert!(dropped.get(), "the unwound frame's destructor ran");

        let trace = std::backtrace::Backtrace::force_capture();
        assert_eq!(trace.status(), std::backtrace::BacktraceStatus::Captured);
        assert!(
            trace.to_string().contains("unwinding"),
            "the backtrace names this test:\n{trace}"
        );
    }
}
