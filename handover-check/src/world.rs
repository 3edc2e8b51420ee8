//! The world the checker explores: one node, a few processes, each running the library's own
//! [`Holder`] — the very type `build.rs` and `keeper.rs` run — against a store model that
//! keeps its real store's merge rules (`store.rs`), with the faults of the protocol's fault
//! model.
//!
//! What the world adds around the holder, and nothing more:
//!
//! * **Real time** `t`, in units of [`UNIT_MS`], passing one unit at a time, never while a
//!   running process has an action to carry out or a round due (a process carries out its
//!   holder's actions one transition each; other processes' transitions interleave between
//!   them, as threads of other processes do).
//! * **Each process's clocks**: a wall clock `t + offset` (the offset steps either way, a
//!   fault; a fixed skew per process, within the protocol's margin) read through a locked
//!   clock that never goes back (after a step back it holds still: a slew at its slowest) and,
//!   for a process whose clock honours its holder's ceiling (`Action::Ceiling`), follows the
//!   wall clock no further than that ceiling carried on to now (`handover::ceiling_ns_at`);
//!   the monotonic clock is real time.
//! * **The generator**: the fence words the holder publishes, the start tick it builds with,
//!   the seal; it issues a tick only where [`handover::fence_refuses`] (the hot path's own
//!   rule) does not refuse, at or after its last tick, at most `max_lead` ticks ahead of the
//!   clock's tick. Two choices cover every range of ticks a holder can span: its first tick
//!   as low as it may be, and each later one as high as the fence and the lead allow.
//! * **Faults**, each with a budget: records deleted, a clock stepped, a process stopped and
//!   continued, killed, a reservation write or a write-back that fails, every trace on the
//!   host deleted (outside the fault model: its search must find a duplicate).
//!
//! The properties: no time-field value issued by two processes (their ranges of issued
//! ticks never overlap), and, in the fault-free searches, liveness: an honest claimant is
//! never refused, never waits longer than the tolerance, and starts within it; and, where a
//! search says so (`keeps_claim`), a holder whose locked clock honours the ceiling its
//! renewals set (`Role::capped`, issue 60) is never refused by the store's clock however far
//! its wall clock is stepped forward.

use monoflake::Layout;
use monoflake::handover::{
    self, Action, Event, Failure, Holder, LetGo, Limits, Now, Outcome, StoreReading, Terms,
};

use crate::store::{Env, Flavour, Store, Who};

/// One unit of real time, ms: half the check interval.
pub const UNIT_MS: u64 = 50;
/// Real time 0, Unix ms.
pub const T0_MS: u64 = 1_700_000_000_000;
/// The stores' check interval, µs (the file store's default).
pub const CHECK_US: u64 = 100_000;
/// The reservation window, ms: short, so that extensions and the reservation's end fall
/// within the horizon (a user setting; the default is 5 s).
pub const WINDOW_MS: u64 = 400;
/// The generator's `max_lead`, ms (the default).
pub const MAX_LEAD_MS: u64 = 100;
/// A remote lease's time to live, units (300 ms: three checks).
pub const TTL: u8 = 6;
/// How far a holder's clock may lead a store's at a check that confirms, ms: half a check.
pub const CLOCK_LEAD_MS: u64 = 50;

/// What one process is.
#[derive(Clone, Copy, Debug)]
pub struct Role {
    /// Its user (the file store's anchors are per user).
    pub uid: u8,
    /// Its state directory (the file store).
    pub dir: u8,
    /// Which of the search's layouts it issues under.
    pub layout: usize,
    /// Only claims and gives the node back, as a search for any node does with a node it
    /// passes over.
    pub passer: bool,
    /// Trusts a reservation beyond the tolerance: its clock jumps to it.
    pub trust: bool,
    /// A fixed skew of its wall clock, ms (within the protocol's margin).
    pub skew_ms: i64,
    /// Its namespaces: 0 the host's; 1 a unit's own network namespace and `/var/tmp`, out of
    /// reach of the host-wide claim and the host's anchors (the file store says so:
    /// `Caveat`).
    pub ns: u8,
    /// A clock step this process's wall clock may take (a fault, from the search's budget),
    /// ms; 0 for none. Forward for a holder (its IDs then run ahead of its successors'
    /// clocks, as do those of a holder whose wall clock was stepped back under it while its
    /// locked clock kept time), back for a successor (it starts behind).
    pub step_ms: i64,
    /// Its clock honours the ceiling its holder sets (`Action::Ceiling`): a `LockedClock`,
    /// the default. Otherwise (a `ManualClock`, a clock of the caller's) the shell's
    /// `set_ceiling` does nothing, and a clock stepped too far ahead of a store's loses the
    /// claim at the next renewal.
    pub capped: bool,
}

/// How many of each fault a run may inject.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Budget {
    pub deletions: u8,
    pub steps: u8,
    pub pauses: u8,
    pub crashes: u8,
    pub failed_extends: u8,
    pub failed_writebacks: u8,
    /// Renewals that fail without an answer (the store unreachable).
    pub failed_renewals: u8,
    /// Every trace of the node on the host deleted: state directories and anchors.
    pub erasures: u8,
}

/// A search.
#[derive(Clone, Debug)]
pub struct Config {
    pub flavour: Flavour,
    pub layouts: Vec<Layout>,
    pub roles: Vec<Role>,
    /// Real time runs from 0 to this, units.
    pub horizon: u8,
    pub budget: Budget,
    /// Records are deleted only under a running holder (it finds out at its next round).
    pub delete_under_running_holder: bool,
    /// Process 0 may let go (a release, or a drop) whenever its keeper waits.
    pub stops: bool,
    /// Check liveness too (fault-free searches).
    pub liveness: bool,
    /// A holder whose clock has a ceiling is never refused by the store's clock: a renewal
    /// that finds it too far ahead is a liveness failure (`BLIND`).
    pub keeps_claim: bool,
}

impl Config {
    /// The protocol's limits for process `p`, as a build computes them (the default
    /// tolerance, `handover::default_tolerance_ms`).
    pub fn limits(&self, p: usize) -> Limits {
        Limits {
            max_lead_ms: MAX_LEAD_MS,
            tolerance_ms: handover::default_tolerance_ms(WINDOW_MS, MAX_LEAD_MS, CHECK_US / 1_000),
            unrecorded_wait_ms: handover::unrecorded_wait_ms(CHECK_US / 1_000),
            trust: self.roles[p].trust,
        }
    }

    fn terms(&self, p: usize) -> Terms<'_> {
        Terms {
            layout: &self.layouts[self.roles[p].layout],
            limits: self.limits(p),
            window_ms: WINDOW_MS,
            check_us: CHECK_US,
        }
    }

    fn layout(&self, p: usize) -> &Layout {
        &self.layouts[self.roles[p].layout]
    }

    fn who(&self, p: usize) -> Who<'_> {
        let role = self.roles[p];
        Who {
            p: p as u8,
            uid: role.uid,
            dir: role.dir,
            ns: role.ns,
            layout: self.layout(p),
        }
    }
}

/// The generator a holder built: what the hot path knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Gen {
    /// It issues only ticks after this one.
    pub resume_after: Option<u64>,
    /// The last tick issued.
    pub last: Option<u64>,
    pub limit: u64,
    pub deadline: u64,
    pub sealed: bool,
}

impl Gen {
    /// The tick of its state: the last issued, or where it resumes.
    ///
    /// Not inlined: inlined into `carry_out`'s `generator.map_or(0, |g| g.last_tick())`, the
    /// release build of rustc 1.95 loaded `last`'s value through an address computed from
    /// its tag before testing whether the generator was there at all, and with none (the tag
    /// uninitialised) read out of bounds: a segmentation fault in safe code, gone with
    /// `-C debug-assertions`.
    #[inline(never)]
    fn last_tick(&self) -> u64 {
        self.last.or(self.resume_after).unwrap_or(0)
    }
}

/// Where a process is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Not started: may claim.
    Unclaimed,
    /// An action of its holder to carry out.
    Act(Action),
    /// Sleeping (a build's wait) until `wake`, `left_ms` of it left, renewing every
    /// `every_ms` when set.
    Sleeping {
        wake: u8,
        left_ms: u64,
        every_ms: Option<u64>,
    },
    /// A keeper waiting for its next round, due at `wake`.
    Idle { wake: u8 },
    /// The file store's write-back by a process that no longer holds the host-wide claim:
    /// the anchor was read, `value` is to be renamed over it (not atomic with the read).
    Renaming { value: u64 },
    /// Gone: released, gave up, or refused.
    Ended,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Proc {
    pub offset_ms: i64,
    /// The locked clock's last reading.
    pub last_read: u64,
    /// The locked clock's ceiling (`Action::Ceiling`): Unix ms at a real time, µs.
    pub ceiling: Option<(u64, u64)>,
    pub stopped: bool,
    pub dead: bool,
    pub state: State,
    pub holder: Option<Holder>,
    pub generator: Option<Gen>,
    /// The first and the last time-field value it issued.
    pub issued: Option<(u64, u64)>,
    /// When it claimed (units), while it has not built its generator.
    pub claimed_at: Option<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct World {
    pub t: u8,
    pub store: Store,
    pub procs: Vec<Proc>,
    pub budget: Budget,
}

/// What a transition found.
pub enum Next {
    World(World, String),
    /// A time-field value issued by two processes.
    Duplicate(String),
    /// A liveness failure in a fault-free search.
    Stuck(String),
}

/// Units a wait of `ms` takes (a sleep lasts at least what was asked).
fn units(ms: u64) -> u8 {
    u8::try_from(ms.div_ceil(UNIT_MS)).unwrap_or(u8::MAX)
}

impl World {
    /// Process 0 holds the node: it claimed it with a record a little in the past, and its
    /// holder built its generator. The others have not started.
    pub fn initial(config: &Config) -> World {
        let mut world = World {
            t: 0,
            store: Store::new(config.flavour, config.roles.len()),
            procs: config
                .roles
                .iter()
                .map(|role| Proc {
                    offset_ms: role.skew_ms,
                    last_read: 0,
                    ceiling: None,
                    stopped: false,
                    dead: false,
                    state: State::Unclaimed,
                    holder: None,
                    generator: None,
                    issued: None,
                    claimed_at: None,
                })
                .collect(),
            budget: config.budget,
        };
        // A node released moments ago by a holder of before.
        let who = config.who(0);
        let env = world.env();
        let _ = world.store.claim(&who, &env);
        let _ = world.store.release(&who, &env, T0_MS - UNIT_MS);
        // Process 0 takes it and runs its build to the keeper's first wait, without faults.
        world.budget = Budget::default();
        let mut out = Vec::new();
        world.claim(config, 0, &mut out);
        let Some(Next::World(mut w, _)) = out.pop() else {
            panic!("process 0 could not claim the node");
        };
        for _ in 0..8 {
            if matches!(w.procs[0].state, State::Idle { .. }) {
                break;
            }
            let mut out = Vec::new();
            w.act(config, 0, &mut out);
            match out.into_iter().next() {
                Some(Next::World(next, _)) => w = next,
                _ => panic!("process 0's build did not run"),
            }
        }
        assert!(
            matches!(w.procs[0].state, State::Idle { .. }),
            "process 0 did not start: {:?}",
            w.procs[0].state
        );
        assert!(w.issue_all(config).is_none());
        w.budget = config.budget;
        w
    }

    /// What the stores see of the world.
    fn env(&self) -> Env {
        Env {
            t: self.t,
            t_ms: T0_MS + u64::from(self.t) * UNIT_MS,
            ttl: TTL,
            ttl_us: u64::from(TTL) * UNIT_MS * 1_000,
            clock_lead_ms: CLOCK_LEAD_MS,
        }
    }

    /// Reads process `p`'s locked clock: its wall clock, no further than its ceiling (carried
    /// on to now by the library's `handover::ceiling_ns_at`) once its holder set one, never
    /// below its last reading.
    fn read_clock(&mut self, p: usize) -> u64 {
        let mono_us = self.mono_us();
        let proc = &mut self.procs[p];
        let wall = (T0_MS + u64::from(self.t) * UNIT_MS)
            .checked_add_signed(proc.offset_ms)
            .unwrap_or(0);
        let follows = proc.ceiling.map_or(wall, |(ms, at)| {
            wall.min(handover::ceiling_ns_at(ms, at, mono_us) / 1_000_000)
        });
        proc.last_read = proc.last_read.max(follows);
        proc.last_read
    }

    /// The monotonic clock: real time, µs.
    fn mono_us(&self) -> u64 {
        u64::from(self.t) * UNIT_MS * 1_000
    }

    fn now(&mut self, p: usize) -> Now {
        Now {
            ms: self.read_clock(p),
            mono_us: self.mono_us(),
        }
    }

    fn running(&self, p: usize) -> bool {
        !self.procs[p].dead && !self.procs[p].stopped
    }

    /// Every world one step from this one.
    pub fn successors(&self, config: &Config) -> Vec<Next> {
        let mut out = Vec::new();
        if let Some(stuck) = self.stuck(config) {
            return vec![Next::Stuck(stuck)];
        }
        // Time passes, unless a running process has something due now.
        let due = (0..self.procs.len()).any(|p| {
            self.running(p)
                && match self.procs[p].state {
                    State::Act(_) | State::Renaming { .. } => true,
                    State::Sleeping { wake, .. } | State::Idle { wake } => wake <= self.t,
                    State::Unclaimed | State::Ended => false,
                }
        });
        if self.t < config.horizon && !due {
            let mut w = self.clone();
            w.t += 1;
            w.store.expire(w.t);
            out.push(Next::World(w, format!("time {}", self.t + 1)));
        }
        self.faults(config, &mut out);
        for p in 0..self.procs.len() {
            if !self.running(p) {
                continue;
            }
            match self.procs[p].state {
                State::Unclaimed => self.claim(config, p, &mut out),
                State::Act(_) | State::Renaming { .. } => self.act(config, p, &mut out),
                State::Sleeping { wake, .. } if wake <= self.t => self.act(config, p, &mut out),
                State::Idle { wake } => {
                    if wake <= self.t {
                        self.act(config, p, &mut out);
                    }
                    if p == 0 && config.stops {
                        let mut w = self.clone();
                        w.deliver(config, p, Event::Stop);
                        out.push(Next::World(w, format!("p{p} lets go (release or drop)")));
                    }
                }
                State::Sleeping { .. } | State::Ended => {}
            }
        }
        out.into_iter()
            .map(|next| match next {
                Next::World(mut w, label) => match w.issue_all(config) {
                    Some(what) => Next::Duplicate(format!("{label}; then {what}")),
                    None => Next::World(w, label),
                },
                other => other,
            })
            .collect()
    }

    /// A liveness failure, in a fault-free search: a claimant that has not started within
    /// what the protocol promises an honest one.
    fn stuck(&self, config: &Config) -> Option<String> {
        if !config.liveness {
            return None;
        }
        let limits = config.limits(1);
        let promise = units(limits.tolerance_ms + limits.unrecorded_wait_ms) + 2;
        self.procs.iter().enumerate().find_map(|(p, proc)| {
            let claimed = proc.claimed_at?;
            (proc.generator.is_none()
                && proc.state != State::Ended
                && self.t >= claimed.saturating_add(promise))
            .then(|| {
                format!(
                    "p{p} claimed at t={claimed} and has not started by t={} (at most {promise} units)",
                    self.t
                )
            })
        })
    }

    fn faults(&self, config: &Config, out: &mut Vec<Next>) {
        let b = self.budget;
        // Records deleted: a state directory (the file store), the keys, the row.
        let dirs: &[u8] = if config.flavour == Flavour::File {
            &[0, 1]
        } else {
            &[0]
        };
        for &dir in dirs {
            let under_running = (0..self.procs.len()).any(|p| {
                self.running(p)
                    && config.roles[p].dir == dir
                    && self.procs[p].generator.is_some_and(|g| !g.sealed)
            });
            if b.deletions > 0
                && self.store.has_records(dir)
                && (!config.delete_under_running_holder || under_running)
            {
                let mut w = self.clone();
                w.budget.deletions -= 1;
                w.store.delete(dir);
                out.push(Next::World(w, format!("records deleted (dir {dir})")));
            }
        }
        if b.erasures > 0
            && let Store::File(f) = &self.store
            && (f.anchors.iter().flatten().any(Option::is_some) || self.store.has_records(0))
        {
            let mut w = self.clone();
            w.budget.erasures -= 1;
            w.store.delete(0);
            w.store.delete(1);
            if let Store::File(f) = &mut w.store {
                f.anchors = [[None, None], [None, None]];
            }
            out.push(Next::World(w, "every trace on the host deleted".into()));
        }
        for p in 0..self.procs.len() {
            let proc = &self.procs[p];
            if proc.dead || proc.state == State::Ended && proc.generator.is_none() {
                continue;
            }
            let delta = config.roles[p].step_ms;
            if delta != 0 && b.steps > 0 {
                let mut w = self.clone();
                w.budget.steps -= 1;
                w.procs[p].offset_ms += delta;
                out.push(Next::World(w, format!("p{p} clock stepped {delta:+} ms")));
            }
            if p == 0 && (proc.stopped || b.pauses > 0) {
                let mut w = self.clone();
                if !proc.stopped {
                    w.budget.pauses -= 1;
                }
                w.procs[p].stopped = !proc.stopped;
                let what = if proc.stopped { "continued" } else { "stopped" };
                out.push(Next::World(w, format!("p{p} {what}")));
            }
            // Any process that has claimed may be killed: the holder, or a successor (whose
            // kill leaves what it reserved to the next).
            if b.crashes > 0 && proc.state != State::Unclaimed {
                let mut w = self.clone();
                w.budget.crashes -= 1;
                w.procs[p].dead = true;
                let who = config.who(p);
                w.store.let_go(&who);
                out.push(Next::World(w, format!("p{p} killed")));
            }
        }
    }

    /// Process `p` claims the node, if the store lets it.
    fn claim(&self, config: &Config, p: usize, out: &mut Vec<Next>) {
        let mut w = self.clone();
        let who = config.who(p);
        let env = w.env();
        let Some(read) = w.store.claim(&who, &env) else {
            return;
        };
        let now = w.read_clock(p);
        let label = format!(
            "p{p} claims at clock +{}, reads {:?}{}",
            now as i64 - T0_MS as i64,
            read.reserved_ms.map(|r| r as i64 - T0_MS as i64),
            if read.recorded || read.reserved_ms.is_none() {
                ""
            } else {
                " (evidence only)"
            }
        );
        if config.roles[p].passer {
            // A search for any node passing this one over gives it back as the protocol says
            // (`handover::give_back`: nothing written).
            let limits = config.limits(p);
            let floor = handover::start_floor_ms(read.reserved_ms, now, &limits);
            match handover::give_back(read.reserved_ms, floor) {
                Some(until) => {
                    let _ = w.store.release(&who, &env, until);
                }
                None => w.store.abandon(&who),
            }
            w.procs[p].state = State::Ended;
            out.push(Next::World(w, format!("{label}; passes it over")));
            return;
        }
        let (holder, action) = Holder::claim(&config.terms(p), read, now);
        w.procs[p].holder = Some(holder);
        w.procs[p].claimed_at = Some(w.t);
        w.take_up(config, p, action);
        let label = format!("{label}; {action:?}");
        w.check_wait(config, p, label, out);
    }

    /// Feeds `event` to `p`'s holder and takes up the action it answers with, carrying out
    /// at once every action that touches nothing but the process itself (the generator's
    /// fence, its seal, its build, its clock, a notice): no other process can tell when those
    /// happen, so they need no transition of their own. What touches the store waits for its
    /// own transition.
    fn deliver(&mut self, config: &Config, p: usize, event: Event) {
        let terms = config.terms(p);
        let action = match self.procs[p].holder.as_mut() {
            Some(holder) => holder.step(&terms, event),
            None => return,
        };
        self.take_up(config, p, action);
    }

    /// Takes up `action`, the holder's answer (see [`World::deliver`]).
    fn take_up(&mut self, config: &Config, p: usize, action: Action) {
        let terms = config.terms(p);
        let mut action = action;
        loop {
            let event = match action {
                Action::AdvanceClock { to_ms } => {
                    self.procs[p].last_read = self.procs[p].last_read.max(to_ms);
                    Event::ClockMoved(true)
                }
                Action::Build {
                    resume_after,
                    limit,
                    deadline,
                } => {
                    self.procs[p].generator = Some(Gen {
                        resume_after,
                        last: None,
                        limit,
                        deadline,
                        sealed: false,
                    });
                    self.procs[p].claimed_at = None;
                    Event::Done
                }
                Action::Fence { limit, deadline } => {
                    if let Some(g) = &mut self.procs[p].generator {
                        g.limit = limit;
                        g.deadline = deadline;
                    }
                    Event::Done
                }
                Action::Seal { .. } => {
                    let last_tick = match &mut self.procs[p].generator {
                        Some(g) => {
                            g.sealed = true;
                            g.last_tick()
                        }
                        None => 0,
                    };
                    Event::Sealed { last_tick }
                }
                Action::Lost { .. } => Event::Done,
                Action::Ceiling { ms, at_mono_us, .. } => {
                    if config.roles[p].capped {
                        self.procs[p].ceiling = Some((ms, at_mono_us));
                    }
                    Event::Done
                }
                Action::Sleep { ms, renew_every_ms } => {
                    let nap = renew_every_ms.map_or(ms, |every| ms.min(every));
                    self.procs[p].state = State::Sleeping {
                        wake: self.t.saturating_add(units(nap)),
                        left_ms: ms,
                        every_ms: renew_every_ms,
                    };
                    return;
                }
                Action::Idle { us } => {
                    self.procs[p].state = State::Idle {
                        wake: self.t.saturating_add(units(us.div_ceil(1_000))),
                    };
                    return;
                }
                other => {
                    self.procs[p].state = State::Act(other);
                    return;
                }
            };
            action = match self.procs[p].holder.as_mut() {
                Some(holder) => holder.step(&terms, event),
                None => return,
            };
        }
    }

    /// Carries out what process `p` has due: one interaction with the store.
    fn act(&self, config: &Config, p: usize, out: &mut Vec<Next>) {
        let who = config.who(p);
        let env = self.env();
        let state = self.procs[p].state;
        let mut w = self.clone();
        match state {
            State::Renaming { value } => {
                if let Store::File(f) = &mut w.store {
                    *f.anchor_mut(&who) = Some(value);
                }
                w.deliver(config, p, Event::WrittenBack(Ok(())));
                out.push(Next::World(w, format!("p{p} renames its anchor: {value}")));
            }
            State::Sleeping {
                left_ms, every_ms, ..
            } => {
                let Some(every) = every_ms else {
                    w.deliver(config, p, Event::Waited(Ok(())));
                    // The wait's end and the re-read it leads to: one transition.
                    w.after(config, p, format!("p{p} waited"), out);
                    return;
                };
                let holder_ms = w.read_clock(p);
                if let Err(f) = w.store.renew(&who, &env, holder_ms).0 {
                    w.deliver(config, p, Event::Waited(Err(f)));
                    w.after(config, p, format!("p{p} renews while waiting: {f:?}"), out);
                    return;
                }
                let left = left_ms.saturating_sub(every);
                if left == 0 {
                    w.deliver(config, p, Event::Waited(Ok(())));
                } else {
                    w.procs[p].state = State::Sleeping {
                        wake: w.t.saturating_add(units(left.min(every))),
                        left_ms: left,
                        every_ms,
                    };
                }
                out.push(Next::World(w, format!("p{p} naps")));
            }
            State::Idle { .. } => {
                // A round: its first interaction with the store, in the same transition.
                w.deliver(config, p, Event::Round);
                w.after(config, p, format!("p{p} keeper round"), out);
            }
            State::Act(action) => self.carry_out(config, p, action, String::new(), out),
            State::Unclaimed | State::Ended => {}
        }
    }

    /// After a local step labelled `label`: carries out the store interaction it led to, if
    /// one is due, in the same transition.
    fn after(self, config: &Config, p: usize, label: String, out: &mut Vec<Next>) {
        match self.procs[p].state {
            State::Act(action) => self.carry_out(config, p, action, label + "; ", out),
            _ => out.push(Next::World(self, label)),
        }
    }

    /// One store interaction of process `p` (and each way it can fail, within the budget).
    fn carry_out(
        &self,
        config: &Config,
        p: usize,
        action: Action,
        before: String,
        out: &mut Vec<Next>,
    ) {
        let who = config.who(p);
        let env = self.env();
        let mut w = self.clone();
        let label = format!("{before}p{p} {action:?}");
        match action {
            Action::Reread => {
                let result = w.store.reread(&who, &env);
                let now_ms = w.read_clock(p);
                w.deliver(config, p, Event::Reread { result, now_ms });
                out.push(Next::World(w, format!("{label}: {result:?}")));
            }
            Action::Renew => {
                let at = w.now(p);
                if self.budget.failed_renewals > 0 {
                    let mut failed = w.clone();
                    failed.budget.failed_renewals -= 1;
                    let last_tick = failed.procs[p].generator.map_or(0, |g| g.last_tick());
                    failed.deliver(
                        config,
                        p,
                        Event::Renewed {
                            at,
                            result: Err(Failure::Failed),
                            last_tick,
                            store: None,
                        },
                    );
                    out.push(Next::World(failed, format!("{label}: unreachable")));
                }
                let (result, refused_ahead) = w.store.renew(&who, &env, at.ms);
                let last_tick = w.procs[p].generator.map_or(0, |g| g.last_tick());
                let label = format!(
                    "{label} at clock +{}: {result:?}",
                    at.ms as i64 - T0_MS as i64
                );
                // A clocked store notes its clock at a renewal that confirms the claim.
                let store = (result.is_ok() && w.store.clocked()).then_some(StoreReading {
                    ms: env.t_ms,
                    lead_ms: env.clock_lead_ms,
                    slack_ms: 0,
                    after_mono_us: w.mono_us(),
                });
                if config.keeps_claim && refused_ahead && w.procs[p].ceiling.is_some() {
                    out.push(Next::Stuck(format!(
                        "{label}: p{p}'s clock, under its ceiling, refused as too far ahead of \
                         the store's"
                    )));
                    return;
                }
                w.deliver(
                    config,
                    p,
                    Event::Renewed {
                        at,
                        result,
                        last_tick,
                        store,
                    },
                );
                w.check_wait(config, p, label, out);
            }
            Action::Extend { until_ms } => {
                if self.budget.failed_extends > 0 {
                    let mut failed = self.clone();
                    failed.budget.failed_extends -= 1;
                    failed.deliver(config, p, Event::Extended(Err(Failure::Failed)));
                    out.push(Next::World(failed, format!("{label}: the write fails")));
                }
                let result = w.store.extend(&who, &env, until_ms);
                w.deliver(config, p, Event::Extended(result));
                out.push(Next::World(w, format!("{label}: {result:?}")));
            }
            Action::WriteBack { until_ms } => {
                if self.budget.failed_writebacks > 0 {
                    let mut failed = self.clone();
                    failed.budget.failed_writebacks -= 1;
                    failed.deliver(config, p, Event::WrittenBack(Err(Failure::Failed)));
                    out.push(Next::World(failed, format!("{label}: the write fails")));
                }
                let host_left =
                    matches!(&w.store, Store::File(f) if f.host_of(&who) != Some(p as u8));
                if host_left {
                    // Not the host-wide claim's holder: its anchor write reads, then renames,
                    // and another writer can come in between. The restored record first.
                    let v = handover::to_stored(config.layout(p), until_ms);
                    let (value, saved) = match &w.store {
                        Store::File(f) => {
                            let now = f.anchors_of(&who)[usize::from(who.uid)];
                            (handover::anchor_after(now, v, false), now)
                        }
                        _ => (v, None),
                    };
                    w.store.restore(&who, until_ms);
                    if let Store::File(f) = &mut w.store {
                        *f.anchor_mut(&who) = saved;
                    }
                    w.procs[p].state = State::Renaming { value };
                    out.push(Next::World(
                        w,
                        format!("{label}: restored record written, anchor read"),
                    ));
                    return;
                }
                w.store.restore(&who, until_ms);
                w.deliver(config, p, Event::WrittenBack(Ok(())));
                out.push(Next::World(w, format!("{label}: written")));
            }
            Action::End { let_go, outcome } => {
                match let_go {
                    LetGo::Release { until_ms } => {
                        let _ = w.store.release(&who, &env, until_ms);
                    }
                    LetGo::Abandon => w.store.abandon(&who),
                    LetGo::Keep => {}
                }
                w.procs[p].state = State::Ended;
                // The shell lifts the clock's ceiling at the end.
                w.procs[p].ceiling = None;
                if config.liveness && !matches!(outcome, Outcome::Released | Outcome::Lost) {
                    out.push(Next::Stuck(format!(
                        "p{p} ended its build without starting: {outcome:?}"
                    )));
                    return;
                }
                out.push(Next::World(w, label));
            }
            // Carried out as they are taken up (`deliver`).
            Action::AdvanceClock { .. }
            | Action::Build { .. }
            | Action::Fence { .. }
            | Action::Seal { .. }
            | Action::Lost { .. }
            | Action::Ceiling { .. }
            | Action::Sleep { .. }
            | Action::Idle { .. } => out.push(Next::World(w, label)),
        }
    }

    /// In a liveness search, a wait longer than the tolerance is a failure.
    fn check_wait(self, config: &Config, p: usize, label: String, out: &mut Vec<Next>) {
        if config.liveness
            && let State::Sleeping { left_ms, .. } = self.procs[p].state
            && left_ms > config.limits(p).tolerance_ms
        {
            out.push(Next::Stuck(format!(
                "p{p} waits {left_ms} ms, more than the tolerance"
            )));
            return;
        }
        out.push(Next::World(self, label));
    }

    /// Every generator issues all it may, now: from the lowest tick it may start in up to
    /// the highest its fence and its lead allow at its clock's tick. A generator under full
    /// load, always — the widest range of ticks a holder can span at each moment, so the
    /// check needs no transition of its own for issuing (see docs/design.md, "What the
    /// checker leaves out"). A duplicate is a tick in two processes' ranges.
    fn issue_all(&mut self, config: &Config) -> Option<String> {
        for p in 0..self.procs.len() {
            if !self.running(p) {
                continue;
            }
            let Some(g0) = self.procs[p].generator else {
                continue;
            };
            if g0.sealed || self.procs[p].holder.as_ref().is_some_and(Holder::ended) {
                continue;
            }
            let layout = config.layout(p);
            let clock = self.read_clock(p);
            let now = layout.tick_at(clock);
            let lead = MAX_LEAD_MS / layout.tick_ms();
            let start = g0.resume_after.map_or(0, |a| a + 1);
            let lowest = now.max(start).max(g0.last.unwrap_or(0));
            let highest = g0.limit.min(now.saturating_add(lead));
            if highest < lowest
                || g0.last.is_some_and(|l| highest <= l)
                || handover::fence_refuses(g0.limit, g0.deadline, now, highest)
            {
                continue;
            }
            let mine = self.procs[p]
                .issued
                .map_or((lowest, highest), |(first, _)| (first, highest));
            if let Some(q) = (0..self.procs.len()).find(|&q| {
                q != p
                    && self.procs[q]
                        .issued
                        .is_some_and(|(a, b)| a <= mine.1 && mine.0 <= b)
            }) {
                return Some(format!(
                    "p{p} issues up to time field {highest} (its clock's tick {now}): its \
                     {}..={} and p{q}'s {:?} overlap",
                    mine.0, mine.1, self.procs[q].issued
                ));
            }
            self.procs[p].issued = Some(mine);
            if let Some(g) = &mut self.procs[p].generator {
                g.last = Some(highest);
            }
        }
        None
    }
}
