//! Links GCC's unwinder into the binary on Linux with glibc (docs/performance.md, "The unwinder
//! linked in").
//!
//! Rust's standard library asks for `libgcc_s.so.1`, the shared unwinder, on this target. Loading
//! it costs a small C program about 0.2 ms on our machines: one more object to map and
//! relocate, and its constructor, which asks the processor for its features with `cpuid`, an
//! instruction that a virtual machine traps. Our commands start 2-9% sooner without it; `git`
//! loads no such library. Naming `libgcc_eh.a` here, the same unwinder as a static archive (what
//! `gcc -static-libgcc` and Rust's own `crt-static` builds use), puts it on the link line ahead
//! of `-lgcc_s`, so every unwinding symbol is taken from it and the linker (`--as-needed`) drops
//! `libgcc_s` from the binary. One unwinder serves the whole
//! process: panics still unwind and backtraces still walk the stack (`tests::unwinding`).
//!
//! Where the C compiler has no `libgcc_eh.a` (a toolchain without GCC's runtime), nothing is
//! named and the build links `libgcc_s` as before.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // Another linker may have another runtime: ask again when it changes.
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let static_crt = var("CARGO_CFG_TARGET_FEATURE")
        .split(',')
        .any(|f| f == "crt-static");
    // A static build already links this unwinder; other platforms have their own.
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" || static_crt {
        return;
    }
    if has_static_unwinder() {
        println!("cargo:rustc-link-lib=static:-bundle=gcc_eh");
    }
}

/// Whether the C compiler that links the binary finds `libgcc_eh.a`: `-print-file-name` prints
/// the archive's whole path when it has one, and the bare name when it has none. The linker is
/// the one configured for the target (`RUSTC_LINKER`, which cargo sets when one is), else `cc`,
/// rustc's default on this target.
fn has_static_unwinder() -> bool {
    let linker = std::env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".to_string());
    Command::new(linker)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .is_some_and(|path| {
            let path = Path::new(path.trim());
            path.is_absolute() && path.is_file()
        })
}
