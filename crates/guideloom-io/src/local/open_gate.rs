//! A test-only stand-in for a slow file system: an open of a gated path waits, on whichever
//! thread runs it, until the test lifts the gate (or a watchdog does, after [`WATCHDOG`],
//! so that a regression fails instead of hanging).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How long a gated open waits before the watchdog lets it through (and says so).
const WATCHDOG: Duration = Duration::from_secs(10);

/// The gate of one path.
#[derive(Debug, Default)]
pub(super) struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    lifted: bool,
    waiting: bool,
    rescued: bool,
}

impl Gate {
    /// Lets the waiting open (and any later one) through.
    pub(super) fn lift(&self) {
        self.state.lock().unwrap().lifted = true;
        self.changed.notify_all();
    }

    /// Whether an open is waiting at the gate now.
    pub(super) fn has_waiter(&self) -> bool {
        self.state.lock().unwrap().waiting
    }

    /// Whether the watchdog, not the test, let an open through.
    pub(super) fn rescued(&self) -> bool {
        self.state.lock().unwrap().rescued
    }
}

static GATES: Mutex<Vec<(PathBuf, Arc<Gate>)>> = Mutex::new(Vec::new());

/// Gates opens of `path` until [`Gate::lift`].
pub(super) fn install(path: &Path) -> Arc<Gate> {
    let gate = Arc::new(Gate::default());
    GATES
        .lock()
        .unwrap()
        .push((path.to_path_buf(), Arc::clone(&gate)));
    gate
}

/// Called by every local open: waits while `path` is gated.
pub(super) fn pass(path: &Path) {
    let gate = GATES
        .lock()
        .unwrap()
        .iter()
        .find(|(p, _)| p == path)
        .map(|(_, g)| Arc::clone(g));
    let Some(gate) = gate else { return };
    let mut state = gate.state.lock().unwrap();
    state.waiting = true;
    let (mut state, timeout) = gate
        .changed
        .wait_timeout_while(state, WATCHDOG, |s| !s.lifted)
        .unwrap();
    state.waiting = false;
    if timeout.timed_out() {
        state.rescued = true;
    }
}
