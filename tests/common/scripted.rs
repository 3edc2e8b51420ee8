//! A coarse clock whose readings each run the next scripted action first: puts another
//! caller's work and a clock move exactly between a caller's load and its compare-exchange, and
//! into its wait. Shared by `tests/stale_retry.rs` and the unit tests of
//! `src/generator/hot.rs` (both include this file by its path); the including module brings
//! `TimeSource` into scope.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::TimeSource;

/// A closure run by one clock reading.
pub type Hook = Box<dyn FnOnce() + Send>;

/// A coarse clock whose readings each run the next scripted action first (not the readings
/// made from inside an action).
#[derive(Clone)]
pub struct Scripted(Arc<Script>);

struct Script {
    ns: AtomicU64,
    hooks: Mutex<VecDeque<Hook>>,
    busy: AtomicBool,
}

impl Scripted {
    pub fn new(ns: u64) -> Scripted {
        Scripted(Arc::new(Script {
            ns: AtomicU64::new(ns),
            hooks: Mutex::new(VecDeque::new()),
            busy: AtomicBool::new(false),
        }))
    }

    pub fn set_ns(&self, ns: u64) {
        self.0.ns.store(ns, Ordering::SeqCst);
    }

    /// The actions for the next readings, in order.
    pub fn script(&self, hooks: Vec<Hook>) {
        self.0.hooks.lock().unwrap().extend(hooks);
    }

    pub fn hooks_left(&self) -> usize {
        self.0.hooks.lock().unwrap().len()
    }

    fn read(&self) -> u64 {
        if !self.0.busy.swap(true, Ordering::SeqCst) {
            let hook = self.0.hooks.lock().unwrap().pop_front();
            if let Some(hook) = hook {
                hook();
            }
            self.0.busy.store(false, Ordering::SeqCst);
        }
        self.0.ns.load(Ordering::SeqCst)
    }
}

impl TimeSource for Scripted {
    fn now_ms(&self) -> u64 {
        self.read() / 1_000_000
    }
    fn precise_now_ms(&self) -> u64 {
        self.read() / 1_000_000
    }
    fn now_ns(&self) -> u64 {
        self.read()
    }
    fn precise_now_ns(&self) -> u64 {
        self.read()
    }
    fn is_coarse(&self) -> bool {
        true
    }
}
