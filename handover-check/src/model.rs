//! The world the checker explores: one node of one store, a few processes that claim it,
//! hold it, lose it and let it go through `monoflake::handover`'s decisions, and the faults
//! the protocol's fault model names. Time is in abstract units (one unit: one tick, one
//! "ms"); the store's check interval is [`CHECK`] units.
//!
//! What is modelled, and how:
//!
//! * **Real time** `t`, advanced one unit at a time, never past a running holder's next
//!   keeper round: a keeper runs at least once per check interval unless its process is
//!   stopped. A stopped process (SIGSTOP, a frozen VM) takes no step and holds nothing up.
//! * **Each process's clock**: the wall clock is `t + offset`; the offset steps both ways
//!   (a fault). A process reads it through a locked clock that never goes back: after a step
//!   back it holds still (a slewing clock at its slowest) — so a holder can run ahead of its
//!   successor's clock, the case that found duplicates.
//! * **The store**: the node's lock (file) or lease (remote: etcd, PostgreSQL; it expires
//!   [`TTL`] after its last renewal), its record (the reservation), the largest restored
//!   record, and on the file store the host's anchor and the host-wide claim (an abstract
//!   socket: it lives exactly as long as the process that bound it, stopped or not, and no
//!   deletion reaches it).
//! * **A claimant** claims, decides with `handover::after_claim`, waits, re-reads and
//!   decides with `handover::after_wait`, confirms, writes its first reservation, and
//!   issues; or passes the node over as a search for any node does (`handover::give_back`).
//! * **A holder** issues ticks (one or more IDs each; a tick is the unit of uniqueness),
//!   under its fence: below its reservation, at most `max_lead` ahead of its clock, and not
//!   past its confirm deadline (`handover::confirm_bound_ms` after the reading at its last
//!   check that found the claim standing). Its keeper round renews, extends
//!   (`handover::extension`), or — the claim gone — seals and writes back
//!   (`handover::final_reservation`, kept by the store as `handover::restored`); a
//!   write-back may fail and is retried each round. It may release at any time.
//! * **Faults**, each with a budget: records deleted (root or the owner removing the state
//!   directory, clearing the keys: the lock goes, the host-wide claim and the anchor stay),
//!   a clock stepped, a process stopped and continued, a process killed (kill -9; a remote
//!   lease then lives out its TTL), a write-back failing (a directory this user can no
//!   longer write).
//!
//! The property: no tick is issued by two processes.

use monoflake::handover::{self, Limits, Step};

/// The store's check interval, in units.
pub const CHECK: u8 = 2;
/// The generator's `max_lead`.
pub const MAX_LEAD: u8 = 1;
/// The reservation window.
pub const WINDOW: u8 = 4;
/// How far ahead of the clock a reservation may be and be waited out: as in a real build,
/// more than the unrecorded wait and a clock step.
pub const TOLERANCE: u8 = 12;
/// A remote store's lease: valid this long after its last renewal.
pub const TTL: u8 = 6;
/// A store with a clock: how far a holder's clock may lead it at a check that confirms
/// (PostgreSQL's default, half a check interval).
pub const CLOCK_LEAD: u8 = CHECK / 2;

/// The protocol's limits for these units, from the protocol's own functions.
pub fn limits() -> Limits {
    Limits {
        max_lead_ms: u64::from(MAX_LEAD),
        tolerance_ms: u64::from(TOLERANCE),
        unrecorded_wait_ms: handover::unrecorded_wait_ms(u64::from(CHECK)),
        trust: false,
    }
}

fn bound() -> u8 {
    narrow(handover::confirm_bound_ms(u64::from(CHECK)))
}

fn narrow(v: u64) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

fn wide(v: Option<u8>) -> Option<u64> {
    v.map(u64::from)
}

/// Which store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// The file store: a lock per node, the host-wide claim, the host's anchors.
    File,
    /// A store on a server without a clock of its own: a lease that expires. (etcd was one,
    /// before its clock — the `Date` of its HTTP gateway — was read at every check.)
    Remote,
    /// A store on a server with a clock of its own (PostgreSQL's `clock_timestamp()`, etcd's
    /// `Date`; real time here: `Date`'s resolution and the skew of etcd's members are in the
    /// lead etcd's claims carry, `etcd_clock::claim_clock`): a lease that expires, a check that finds a holder whose clock leads the
    /// store's by more than [`CLOCK_LEAD`] (`handover::clock_lead_refused`) and takes its
    /// claim (it seals and writes back), and a
    /// claimant that found no record starting above `handover::store_floor_ms` of the
    /// store's clock at its claim.
    Clocked,
}

/// How many of each fault a run may inject, and its size.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub flavour: Flavour,
    pub procs: usize,
    /// The last process only passes the node over (with three or more).
    pub passer: bool,
    /// Real time runs from 0 to this.
    pub horizon: u8,
    pub deletions: u8,
    /// Records are deleted only under a holder that is running (not stopped), which then
    /// finds out at its next round: the case a store without a shared clock survives with
    /// clocks apart (see docs/design.md, "The hand-over", for the others).
    pub delete_under_running_holder: bool,
    pub steps: u8,
    /// How far a clock step moves the wall clock, either way.
    pub step_size: i8,
    pub pauses: u8,
    pub crashes: u8,
    pub failed_writes: u8,
}

/// What a process does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not started: may claim.
    Idle,
    /// Holds the claim and waits until `until`; then re-reads (`floor` `None`) or starts above
    /// `floor`.
    Waiting {
        until: u8,
        claimed: u8,
        /// The store's clock at the claim (a store with a clock; else 0).
        db: u8,
        read: Option<u8>,
        floor: Option<u8>,
    },
    /// Holds the node and issues.
    Holding {
        read: Option<u8>,
        floor: u8,
        last: Option<u8>,
        reserved: u8,
        deadline: u8,
        next_round: u8,
    },
    /// Lost the claim, sealed; what it used is still to be written back.
    Lost { used: u8, next_round: u8 },
    /// Gone: released, gave the node back, refused, or killed.
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Proc {
    pub phase: Phase,
    pub offset: i8,
    /// The locked clock's last reading.
    pub last_read: u8,
    pub stopped: bool,
    /// Only claims and gives the node back, as a search for any node does with a node it
    /// passes over: never holds it.
    pub passes_over: bool,
    /// The first and the last tick it issued: a process issues in ticks that never go back,
    /// so two processes issued no tick twice exactly when these ranges are disjoint (the
    /// stricter property the chaos soak checks as "overlapping tenures").
    pub issued: Option<(u8, u8)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Store {
    /// Who holds the lock or the lease (`None`: free, or its record deleted).
    pub holder: Option<u8>,
    /// When a remote lease expires unless renewed.
    pub expires: u8,
    pub record: Option<u8>,
    pub restored: Option<u8>,
    /// The file store's host anchor of the node (survives the state directory).
    pub anchor: Option<u8>,
    /// The file store's host-wide claim: the process that bound it, while it lives.
    pub host: Option<u8>,
}

/// Fault budgets left.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Budget {
    pub deletions: u8,
    pub steps: u8,
    pub pauses: u8,
    pub crashes: u8,
    pub failed_writes: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct World {
    pub t: u8,
    pub store: Store,
    pub procs: Vec<Proc>,
    pub budget: Budget,
}

impl World {
    /// Forgets what can no longer matter, so that worlds that differ only there are one:
    /// a process that is gone keeps only the ticks it issued; the file store has no lease
    /// expiry.
    fn canonical(mut self, config: &Config) -> World {
        if config.flavour == Flavour::File {
            self.store.expires = 0;
        }
        for proc in &mut self.procs {
            if proc.phase == Phase::Done {
                proc.offset = 0;
                proc.last_read = 0;
                proc.stopped = false;
            }
        }
        self
    }
}

/// A transition's outcome: the next world, or a duplicate.
pub enum Next {
    World(World, String),
    Duplicate(String),
}

impl World {
    /// Process 0 holds the node (it found a record at 0 and started at once: its first
    /// reservation written, its claim confirmed); the others have not started.
    pub fn initial(config: &Config) -> World {
        let mut world = World::idle(config);
        if let Some(last) = world.procs.last_mut()
            && config.procs > 2
            && config.passer
        {
            last.passes_over = true;
        }
        world.store.holder = Some(0);
        world.store.expires = TTL;
        if config.flavour == Flavour::File {
            world.store.host = Some(0);
        }
        world.write_record(config, WINDOW);
        world.procs[0].phase = Phase::Holding {
            read: Some(0),
            floor: 0,
            last: None,
            reserved: WINDOW,
            deadline: bound(),
            next_round: CHECK,
        };
        world
    }

    fn idle(config: &Config) -> World {
        World {
            t: 0,
            store: Store::default(),
            procs: vec![
                Proc {
                    phase: Phase::Idle,
                    offset: 0,
                    last_read: 0,
                    stopped: false,
                    passes_over: false,
                    issued: None,
                };
                config.procs
            ],
            budget: Budget {
                deletions: config.deletions,
                steps: config.steps,
                pauses: config.pauses,
                crashes: config.crashes,
                failed_writes: config.failed_writes,
            },
        }
    }

    /// Reads process `p`'s locked clock: the wall clock, never below its last reading.
    fn read_clock(&mut self, p: usize) -> u8 {
        let proc = &mut self.procs[p];
        let wall = (i16::from(self.t) + i16::from(proc.offset)).clamp(0, 255);
        proc.last_read = proc.last_read.max(wall as u8);
        proc.last_read
    }

    /// Whether `p` holds the claim as the store sees it now.
    fn holds(&self, config: &Config, p: usize) -> bool {
        self.store.holder == Some(p as u8)
            && (config.flavour == Flavour::File || self.t < self.store.expires)
    }

    /// What the store reads as the node's reservation ([`handover::reservation_of`]).
    fn reservation(&self) -> Option<u8> {
        handover::reservation_of([
            wide(self.store.record),
            wide(self.store.restored),
            wide(self.store.anchor),
        ])
        .map(narrow)
    }

    /// Writes the node's reservation (and, on the file store, the host's anchor).
    fn write_record(&mut self, config: &Config, until: u8) {
        self.store.record = Some(until);
        if config.flavour == Flavour::File {
            self.store.anchor = Some(until);
        }
    }

    /// Frees what `p` holds in the store (a release, a give-back, a process that ended).
    fn let_go(&mut self, p: usize) {
        if self.store.holder == Some(p as u8) {
            self.store.holder = None;
        }
        if self.store.host == Some(p as u8) {
            self.store.host = None;
        }
    }

    /// Every world one step from this one.
    pub fn successors(&self, config: &Config) -> Vec<Next> {
        let mut out = Vec::new();
        let limits = limits();
        // Time passes, unless a running holder's keeper round is due.
        if self.t < config.horizon {
            let due = self.procs.iter().any(|p| {
                !p.stopped
                    && matches!(p.phase,
                        Phase::Holding { next_round, .. } | Phase::Lost { next_round, .. }
                            if next_round <= self.t)
            });
            if !due {
                let mut w = self.clone();
                w.t += 1;
                out.push(Next::World(w, format!("time {}", self.t + 1)));
            }
        }
        // Faults on the store.
        let under_running = self.store.holder.is_some_and(|h| {
            matches!(self.procs[h as usize].phase, Phase::Holding { .. })
                && !self.procs[h as usize].stopped
        });
        if self.budget.deletions > 0
            && (self.store.record.is_some() || self.store.holder.is_some())
            && (!config.delete_under_running_holder || under_running)
        {
            let mut w = self.clone();
            w.budget.deletions -= 1;
            w.store.record = None;
            w.store.restored = None;
            w.store.holder = None;
            out.push(Next::World(w, "records deleted".into()));
        }
        for p in 0..self.procs.len() {
            let proc = self.procs[p];
            if proc.phase == Phase::Done {
                continue;
            }
            // Faults on the process, where they can hurt: the holder (process 0) stepped
            // forward — its IDs then run ahead of its successors' clocks, as do those of a
            // holder whose wall clock was stepped back under it while its locked clock kept
            // time — stopped, killed; its successor (process 1) stepped back, so it starts
            // behind. (The other directions only move a process's IDs up, away from the
            // others'.)
            let step = match p {
                0 => Some(config.step_size),
                1 => Some(-config.step_size),
                _ => None,
            };
            if let Some(delta) = step
                && self.budget.steps > 0
            {
                let mut w = self.clone();
                w.budget.steps -= 1;
                w.procs[p].offset += delta;
                out.push(Next::World(w, format!("p{p} clock stepped {delta:+}")));
            }
            if p == 0 && (proc.stopped || self.budget.pauses > 0) {
                let mut w = self.clone();
                if !proc.stopped {
                    w.budget.pauses -= 1;
                }
                w.procs[p].stopped = !proc.stopped;
                out.push(Next::World(
                    w,
                    format!(
                        "p{p} {}",
                        if proc.stopped { "continued" } else { "stopped" }
                    ),
                ));
            }
            if p == 0 && self.budget.crashes > 0 && proc.phase != Phase::Idle {
                let mut w = self.clone();
                w.budget.crashes -= 1;
                w.procs[p].phase = Phase::Done;
                // The lock and the host-wide claim die with the process; a remote lease lives
                // out its TTL.
                if config.flavour == Flavour::File {
                    w.let_go(p);
                }
                out.push(Next::World(w, format!("p{p} killed")));
            }
            if proc.stopped {
                continue;
            }
            self.process_steps(config, &limits, p, &mut out);
        }
        out.into_iter()
            .map(|n| match n {
                Next::World(w, label) => Next::World(w.canonical(config), label),
                d => d,
            })
            .collect()
    }

    fn process_steps(&self, config: &Config, limits: &Limits, p: usize, out: &mut Vec<Next>) {
        let proc = self.procs[p];
        match proc.phase {
            Phase::Idle => {
                let free = match config.flavour {
                    Flavour::File => self.store.holder.is_none() && self.store.host.is_none(),
                    Flavour::Remote | Flavour::Clocked => {
                        self.store.holder.is_none() || self.t >= self.store.expires
                    }
                };
                if !free {
                    return;
                }
                let mut w = self.clone();
                w.store.holder = Some(p as u8);
                w.store.expires = self.t.saturating_add(TTL);
                if config.flavour == Flavour::File {
                    w.store.host = Some(p as u8);
                }
                let read = w.reservation();
                let recorded = w.store.record.is_some();
                let now = w.read_clock(p);
                let label = format!(
                    "p{p} claims at clock {now}, reads {read:?}{}",
                    if recorded || read.is_none() {
                        ""
                    } else {
                        " (evidence only)"
                    }
                );
                if proc.passes_over {
                    w.give_back(config, limits, p, read, now);
                    out.push(Next::World(w, format!("{label}; passes the node over")));
                    return;
                }
                let step = handover::after_claim(wide(read), recorded, u64::from(now), limits);
                out.push(w.follow(config, limits, p, step, read, now, label));
            }
            Phase::Waiting {
                until,
                claimed,
                db,
                read,
                floor,
            } => {
                // A search for any node passes a node with no record over when it meets a
                // cheaper one: it gives this one back.
                if floor.is_none() {
                    let mut w = self.clone();
                    w.give_back(config, limits, p, read, claimed);
                    out.push(Next::World(w, format!("p{p} passes the node over")));
                }
                if self.t < until {
                    return;
                }
                let mut w = self.clone();
                if !w.holds(config, p) {
                    // Its renewal or re-read fails: the build ends, writing nothing.
                    w.let_go(p);
                    w.procs[p].phase = Phase::Done;
                    out.push(Next::World(
                        w,
                        format!("p{p} finds its claim gone, gives up"),
                    ));
                    return;
                }
                match floor {
                    Some(floor) => {
                        out.push(w.start(config, p, read, floor, format!("p{p} waited")))
                    }
                    None => {
                        let mut again = w.reservation();
                        let mut label = format!("p{p} re-reads {again:?}");
                        if config.flavour == Flavour::Clocked {
                            // Above what any holder the store confirmed can have issued
                            // before the claim, by the store's clock at the claim.
                            let by_store = handover::store_floor_ms(
                                u64::from(db),
                                u64::from(CHECK),
                                u64::from(CLOCK_LEAD),
                                u64::from(MAX_LEAD),
                            );
                            again = handover::reservation_of([wide(again), by_store]).map(narrow);
                            label += &format!(" and the store's floor {by_store:?}");
                        }
                        let now = w.read_clock(p);
                        let step = handover::after_wait(
                            wide(again),
                            u64::from(claimed),
                            u64::from(now),
                            limits,
                        );
                        out.push(w.follow(config, limits, p, step, again, claimed, label));
                    }
                }
            }
            Phase::Holding {
                read,
                floor,
                last,
                reserved,
                deadline,
                next_round,
            } => {
                // Issue, in the tick the clock is in (or the last one, or the next, borrowing
                // within the lead).
                let mut probe = self.clone();
                let now = probe.read_clock(p);
                let base = now.max(floor).max(last.unwrap_or(0));
                // Two choices cover every range a holder's ticks can span: its first tick as
                // low as it may be, and each later one as high as the fence lets it borrow
                // (what it writes back is never below what it issued).
                let highest = reserved
                    .saturating_sub(1)
                    .min(deadline)
                    .min(now.saturating_add(MAX_LEAD));
                let mut ticks = vec![highest];
                if last.is_none() {
                    ticks.push(base);
                }
                for tick in ticks {
                    let fits = tick >= floor
                        && tick < reserved
                        && tick <= deadline
                        && tick <= now.saturating_add(MAX_LEAD)
                        && last.is_none_or(|l| tick >= l);
                    if !fits {
                        continue;
                    }
                    let mine = proc.issued.map_or((tick, tick), |(first, _)| (first, tick));
                    if let Some(q) = (0..self.procs.len()).find(|&q| {
                        q != p
                            && self.procs[q]
                                .issued
                                .is_some_and(|(a, b)| a <= mine.1 && mine.0 <= b)
                    }) {
                        out.push(Next::Duplicate(format!(
                            "p{p} issues tick {tick} (clock {now}): its ticks {}..={} and \
                             p{q}'s {:?} overlap",
                            mine.0, mine.1, self.procs[q].issued
                        )));
                        continue;
                    }
                    let mut w = probe.clone();
                    w.procs[p].issued = Some(mine);
                    w.procs[p].phase = Phase::Holding {
                        read,
                        floor,
                        last: Some(tick),
                        reserved,
                        deadline,
                        next_round,
                    };
                    out.push(Next::World(
                        w,
                        format!("p{p} issues tick {tick} (clock {now})"),
                    ));
                }
                // A release.
                let used_end = last.map_or(floor, |l| l + 1);
                let mut w = self.clone();
                let until = narrow(handover::final_reservation(u64::from(used_end), wide(read)));
                if w.holds(config, p) {
                    w.write_record(config, until);
                    w.let_go(p);
                    w.procs[p].phase = Phase::Done;
                    out.push(Next::World(w, format!("p{p} releases at {until}")));
                } else {
                    // The release's write finds the claim gone: what it used is written back,
                    // as by a keeper that found the claim lost.
                    w.procs[p].phase = Phase::Lost {
                        used: until,
                        next_round: self.t,
                    };
                    w.write_back(config, p, until, out, format!("p{p} releases, claim gone"));
                }
                // A keeper round, when due (time waits for it unless the process is stopped).
                if self.t < next_round {
                    return;
                }
                let mut w = self.clone();
                let now = w.read_clock(p);
                let used_end = last.map_or(floor, |l| l + 1);
                if w.holds(config, p) && w.ahead_of_store(config, now) {
                    // The renewal finds the clock too far ahead of the store's: the claim is
                    // lost here, as if gone — sealed, what it used written back.
                    let used = narrow(handover::final_reservation(u64::from(used_end), wide(read)));
                    w.procs[p].phase = Phase::Lost {
                        used,
                        next_round: self.t,
                    };
                    w.write_back(
                        config,
                        p,
                        used,
                        out,
                        format!("p{p} renews at clock {now}, ahead of the store's: lost"),
                    );
                } else if w.holds(config, p) {
                    let mut reserved = reserved;
                    w.store.expires = self.t.saturating_add(TTL);
                    if let Some(want) = handover::extension(
                        u64::from(reserved),
                        u64::from(now),
                        u64::from(used_end),
                        u64::from(WINDOW),
                    ) {
                        reserved = narrow(want);
                        w.write_record(config, reserved);
                    }
                    w.procs[p].phase = Phase::Holding {
                        read,
                        floor,
                        last,
                        reserved,
                        deadline: now.saturating_add(bound()),
                        next_round: self.t + CHECK,
                    };
                    out.push(Next::World(w, format!("p{p} renews at clock {now}")));
                } else {
                    let used = narrow(handover::final_reservation(u64::from(used_end), wide(read)));
                    w.procs[p].phase = Phase::Lost {
                        used,
                        next_round: self.t,
                    };
                    w.write_back(config, p, used, out, format!("p{p} finds its claim lost"));
                }
            }
            Phase::Lost { used, .. } => {
                let w = self.clone();
                w.write_back(config, p, used, out, format!("p{p} retries its write-back"));
            }
            Phase::Done => {}
        }
    }

    /// Carries out a step of the protocol for `p`, which claimed at clock `claimed` and read
    /// `read`: start, wait (then start, or re-read), or give the node back.
    #[allow(clippy::too_many_arguments)]
    fn follow(
        mut self,
        config: &Config,
        limits: &Limits,
        p: usize,
        step: Step,
        read: Option<u8>,
        claimed: u8,
        label: String,
    ) -> Next {
        let (ms, floor) = match step {
            Step::Start { floor_ms } => {
                return self.start(config, p, read, narrow(floor_ms), label);
            }
            Step::WaitThenStart { ms, floor_ms } => (ms, Some(narrow(floor_ms))),
            Step::WaitThenReread { ms } => (ms, None),
            Step::Refuse { .. } | Step::Jump { .. } => {
                let now = self.read_clock(p);
                self.give_back(config, limits, p, read, now);
                return Next::World(self, format!("{label}; refuses"));
            }
        };
        self.procs[p].phase = Phase::Waiting {
            until: self.t.saturating_add(narrow(ms)),
            claimed,
            db: if config.flavour == Flavour::Clocked {
                self.t
            } else {
                0
            },
            read,
            floor,
        };
        Next::World(self, label)
    }

    /// Starts issuing above `floor`: the first renewal, then the first reservation.
    fn start(
        mut self,
        config: &Config,
        p: usize,
        read: Option<u8>,
        floor: u8,
        label: String,
    ) -> Next {
        let now = self.read_clock(p);
        let start = now.max(floor);
        let until = start.saturating_add(WINDOW);
        if !self.holds(config, p) {
            self.let_go(p);
            self.procs[p].phase = Phase::Done;
            return Next::World(
                self,
                format!("{label}; its first write finds the claim gone"),
            );
        }
        if self.ahead_of_store(config, now) {
            // The first renewal, before the first reservation, does not confirm: the build
            // fails and gives the node back, nothing written.
            self.let_go(p);
            self.procs[p].phase = Phase::Done;
            return Next::World(
                self,
                format!("{label}; ahead of the store's clock at its first check: refused"),
            );
        }
        self.write_record(config, until);
        self.store.expires = self.t.saturating_add(TTL);
        self.procs[p].phase = Phase::Holding {
            read,
            floor,
            last: None,
            reserved: until,
            deadline: now.saturating_add(bound()),
            next_round: self.t + CHECK,
        };
        Next::World(
            self,
            format!("{label}; starts above {floor}, reserves {until}"),
        )
    }

    /// Whether a store with a clock refuses to confirm a check made at clock `now`.
    fn ahead_of_store(&self, config: &Config, now: u8) -> bool {
        config.flavour == Flavour::Clocked
            && handover::clock_lead_refused(
                u64::from(now),
                u64::from(self.t),
                u64::from(CLOCK_LEAD),
            )
            .is_some()
    }

    /// Gives the node back unused: writes what `handover::give_back` says (nothing).
    fn give_back(&mut self, config: &Config, limits: &Limits, p: usize, read: Option<u8>, now: u8) {
        let floor = handover::start_floor_ms(wide(read), u64::from(now), limits);
        if let Some(until) = handover::give_back(wide(read), floor)
            && self.holds(config, p)
        {
            self.write_record(config, narrow(until));
        }
        self.let_go(p);
        self.procs[p].phase = Phase::Done;
    }

    /// A lost holder writes back what it used beside the records (never lowering them); it
    /// may fail, and is tried again at each round. Once written, the file store lets go of
    /// the host-wide claim.
    fn write_back(&self, config: &Config, p: usize, used: u8, out: &mut Vec<Next>, label: String) {
        let mut ok = self.clone();
        ok.store.restored = Some(narrow(handover::restored(
            wide(ok.store.restored),
            u64::from(used),
        )));
        if config.flavour == Flavour::File {
            ok.store.anchor = Some(narrow(handover::restored(
                wide(ok.store.anchor),
                u64::from(used),
            )));
        }
        ok.let_go(p);
        ok.procs[p].phase = Phase::Done;
        out.push(Next::World(ok, format!("{label}; writes back {used}")));
        if self.budget.failed_writes > 0 {
            let mut failed = self.clone();
            failed.budget.failed_writes -= 1;
            if let Phase::Lost { next_round, .. } = &mut failed.procs[p].phase {
                *next_round = self.t + CHECK;
            }
            // The lock (or lease) is gone; on the file store the host-wide claim stays
            // until the write-back succeeds.
            if failed.store.holder == Some(p as u8) {
                failed.store.holder = None;
            }
            out.push(Next::World(
                failed,
                format!("{label}; its write-back of {used} fails"),
            ));
        }
    }
}
