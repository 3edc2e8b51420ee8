//! Each generator slot's wall clock: libfaketime (`LD_PRELOAD`) reading an offset from a
//! timestamp file of the slot's own, which the nemesis rewrites to step that clock by ±1 s or
//! ±1 h. The monotonic clock is left alone (`FAKETIME_DONT_FAKE_MONOTONIC=1`), as a real
//! clock step leaves it. A restarted process keeps its slot's offset: a host whose clock is
//! wrong stays wrong across restarts.
//!
//! The checker asks [`Clocks::max_offset_ms`] how far ahead a process's clock could have been
//! while it lived, to bound the time in its IDs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tokio::process::Command;

use crate::procs::now_ms;

/// Where Debian's libfaketime puts the preload library, by architecture.
const LIBRARIES: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
];

/// The furthest a slot's offset is stepped from the real clock, in seconds.
const MAX_OFFSET_S: i64 = 2 * 3600;

#[derive(Debug)]
pub struct Clocks {
    lib: Option<PathBuf>,
    dir: PathBuf,
    /// Per slot: (real ms, offset s) from the first write on.
    history: Mutex<HashMap<usize, Vec<(i64, i64)>>>,
}

impl Clocks {
    /// Offsets live in `dir`; `None` for the library when libfaketime is not installed.
    pub fn new(dir: &Path) -> Clocks {
        let lib = std::env::var_os("CHAOS_LIBFAKETIME")
            .map(PathBuf::from)
            .or_else(|| LIBRARIES.iter().map(PathBuf::from).find(|p| p.exists()));
        Clocks {
            lib,
            dir: dir.to_owned(),
            history: Mutex::new(HashMap::new()),
        }
    }

    pub fn available(&self) -> bool {
        self.lib.is_some()
    }

    fn file(&self, slot: usize) -> PathBuf {
        self.dir.join(format!("slot-{slot}.offset"))
    }

    fn write(&self, slot: usize, offset_s: i64) -> std::io::Result<()> {
        let text = format!("{offset_s:+}\n");
        // A reader must never see a half-written file: write aside, then rename.
        let tmp = self.dir.join(format!("slot-{slot}.offset.tmp"));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, self.file(slot))?;
        self.history
            .lock()
            .expect("clock history")
            .entry(slot)
            .or_default()
            .push((now_ms(), offset_s));
        Ok(())
    }

    /// Puts `cmd` under slot `slot`'s clock (offset 0 until stepped).
    pub fn apply(&self, cmd: &mut Command, slot: usize) -> std::io::Result<()> {
        let Some(lib) = &self.lib else {
            return Ok(());
        };
        if !self.file(slot).exists() {
            self.write(slot, 0)?;
        }
        cmd.env("LD_PRELOAD", lib)
            .env("FAKETIME_TIMESTAMP_FILE", self.file(slot))
            // Read the file again at most once a second, not on every clock read.
            .env("FAKETIME_CACHE_DURATION", "1")
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        Ok(())
    }

    /// Steps slot `slot`'s clock by `delta_s`; returns the new offset.
    pub fn step(&self, slot: usize, delta_s: i64) -> std::io::Result<i64> {
        let now = self.offset_s(slot);
        let next = (now + delta_s).clamp(-MAX_OFFSET_S, MAX_OFFSET_S);
        self.write(slot, next)?;
        Ok(next)
    }

    fn offset_s(&self, slot: usize) -> i64 {
        self.history
            .lock()
            .expect("clock history")
            .get(&slot)
            .and_then(|h| h.last())
            .map_or(0, |&(_, o)| o)
    }

    /// The largest offset (ms) slot `slot`'s clock had at any time in `[from, to]` (real ms),
    /// counting the one in force at `from` (a process's clock never goes back, it slews, so an
    /// offset once seen stays in its IDs).
    pub fn max_offset_ms(&self, slot: Option<usize>, from: i64, to: i64) -> i64 {
        let Some(slot) = slot else { return 0 };
        let history = self.history.lock().expect("clock history");
        let Some(h) = history.get(&slot) else {
            return 0;
        };
        let mut max = 0;
        for (i, &(at, offset)) in h.iter().enumerate() {
            let next = h.get(i + 1).map_or(i64::MAX, |&(t, _)| t);
            // In force over [at, next): counts when that meets [from, to].
            if at <= to && next > from {
                max = max.max(offset * 1000);
            }
        }
        max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_counts_every_offset_in_force_while_a_process_lived() {
        let dir = std::env::temp_dir().join(format!("chaos-clocks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let clocks = Clocks::new(&dir);
        let mut h = clocks.history.lock().unwrap();
        h.insert(0, vec![(100, 0), (200, 3600), (300, 0), (400, -3600)]);
        drop(h);
        assert_eq!(clocks.max_offset_ms(Some(0), 0, 150), 0);
        assert_eq!(clocks.max_offset_ms(Some(0), 0, 250), 3_600_000);
        // Started after the step back: the hour ahead was never in force.
        assert_eq!(clocks.max_offset_ms(Some(0), 310, 500), 0);
        // Lived across the step back: still an hour (a clock never goes back, it slews).
        assert_eq!(clocks.max_offset_ms(Some(0), 250, 500), 3_600_000);
        assert_eq!(clocks.max_offset_ms(None, 0, 500), 0);
        assert_eq!(clocks.step(0, 1).unwrap(), -3599);
        assert_eq!(
            std::fs::read_to_string(dir.join("slot-0.offset")).unwrap(),
            "-3599\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
