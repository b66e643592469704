//! git-tabellio: runs, checkpoints and validation evidence kept inside git, and promotion of
//! exactly-validated commits.
//!
//! The library does the work and returns typed outcomes; it never prints. `main.rs` parses the
//! command line, calls in here and renders the result. Arrows go one way, down the layers of
//! `docs/architecture.md` (a test keeps them): drivers ([`harness`], [`sync`], [`demo`]) →
//! operations ([`lifecycle`], [`verify`], [`hooks`], [`export`], [`report`]) → domain services
//! ([`run`], [`evidence`], [`plans`], [`trust`]) → [`store`] and [`runner`] → [`model`],
//! [`error`], [`sys`].
//!
//! `unsafe` code lives in [`sys`] alone; everywhere else the compiler refuses it (the lint
//! policy is `Cargo.toml`'s `[lints]` table).

pub mod demo;
pub mod error;
pub mod evidence;
pub mod export;
pub mod harness;
pub mod hooks;
pub mod lifecycle;
pub mod model;
pub mod plans;
pub mod report;
pub mod run;
pub mod runner;
pub mod store;
pub mod sync;
#[allow(unsafe_code)]
pub mod sys;
pub mod trust;
pub mod verify;

pub use error::{Error, ErrorKind, Result};

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
