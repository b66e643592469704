//! Ctrl-C (SIGINT), SIGTERM and SIGHUP while `validate` runs checks.
//!
//! The validation runner puts each check in its own process group, so a Ctrl-C at the terminal
//! reaches us but not the check. While a [`Guard`] lives, a signal sets a flag (also handed to
//! gix as its `should_interrupt`) and the signal is forwarded to the process group of every
//! child we started, and keeps being forwarded — SIGKILL after a grace period — until the guard
//! is dropped, so a check started after the signal is stopped at once too. The caller sees
//! [`received`], removes what it created, writes nothing, and the CLI ends the process by the
//! same signal ([`reraise`]) so a shell or `git` sees the usual status. The mechanics are
//! [`crate::sys::signals`] with [`Forwarding::UntilDropped`].

use std::time::Duration;

use crate::error::{Context, Result};
use crate::sys::signals::Forwarding;
pub use crate::sys::signals::{flag, received, reraise, Guard};

/// Between the forwarded signal and SIGKILL to a check that ignores it.
const GRACE: Duration = Duration::from_secs(2);

/// Install the handlers and start forwarding; dropping the guard restores the previous ones.
pub fn install() -> Result<Guard> {
    Guard::install(Forwarding::UntilDropped { grace: GRACE })
        .context(|| "could not install the signal handlers".to_string())
}

/// [`install`], unless a guard is installed already (a landing validating lanes side by side
/// installs one for all of them): `None` then.
pub fn install_unless_active() -> Result<Option<Guard>> {
    if Guard::active() {
        return Ok(None);
    }
    install().map(Some)
}
