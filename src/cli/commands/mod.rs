//! One file per subcommand: its arguments (`XxxArgs`) and `cmd_xxx(&Ctx, &XxxArgs)`, which
//! calls the library and turns its outcome into an [`Output`](super::Output).

pub mod abandon;
pub mod approve;
pub mod blame;
pub mod checkpoint;
pub mod checks;
pub mod cleanup;
pub mod completions;
pub mod context;
pub mod demo;
pub mod enqueue;
pub mod evidence;
pub mod export;
pub mod finish;
pub mod gc;
pub mod hook;
pub mod hooks;
pub mod init;
pub mod land;
pub mod list;
pub mod log;
pub mod r#loop;
pub mod man;
pub mod plans;
pub mod promote;
pub mod queue;
pub mod reopen;
pub mod rewind;
pub mod start;
pub mod status;
pub mod sync;
pub mod validate;
pub mod verify;
pub mod worker;
