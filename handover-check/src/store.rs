//! The stores the checker's holders run against: one node of each real store, kept with that
//! store's own merge rules — what a claim reads, what a write may overwrite, what a release
//! lowers, what a deletion leaves, what dies with a process. Values are kept as the real
//! stores keep them, as ID values ([`handover::to_stored`]), and read back through
//! [`handover::from_stored`] in the reader's layout; merges use the library's own functions
//! ([`handover::reservation_of`], [`handover::restored`], [`handover::anchor_after`],
//! [`handover::clock_lead_refused`]).
//!
//! What each model leaves out of its real store is listed in docs/design.md ("What the
//! checker's stores leave out").

use monoflake::Layout;
use monoflake::handover::{self, ClaimRead, Failure};

/// Which store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flavour {
    /// The file store: a lock file per node in a state directory (two directories here), the
    /// node's host-wide claim (an abstract socket that lives exactly as long as the process
    /// that bound it, or until its write-back), the host's anchors in `/var/tmp` (one per
    /// user, overwritten by that user's writes, which survive every state directory).
    File,
    /// etcd: a claim key on a lease that expires unless kept alive, the reservation key
    /// (written only by a transaction compared against the claim's create revision), a
    /// write-back key per lease (`restored/<N>/<lease>`), a clock (the `Date` of its gateway).
    Etcd,
    /// PostgreSQL: one row per node with a claimant token, a fencing counter and a lease
    /// expiry on the database's clock; writes take `greatest()`, a release sets the value, a
    /// write-back makes a deleted row again with fencing counter 0 (evidence, not a record).
    Pg,
}

/// Who is asking, and in which unit.
#[derive(Clone, Copy, Debug)]
pub struct Who<'a> {
    pub p: u8,
    pub uid: u8,
    pub dir: u8,
    /// The namespaces it runs in: 0 the host's; 1 a unit's own network namespace and
    /// `/var/tmp` (systemd's `PrivateNetwork=` and `PrivateTmp=`).
    pub ns: u8,
    pub layout: &'a Layout,
}

/// One state directory of the file store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Dir {
    /// The process whose lock file it is (the lock is on the file: a deleted directory takes
    /// it with it, and the holder's next check finds it gone).
    pub lock: Option<u8>,
    pub record: Option<u64>,
    /// The largest restored record (files never replace one another).
    pub restored: Option<u64>,
}

/// The file store's one node on one host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FileNode {
    pub dirs: [Dir; 2],
    /// The host's anchors, per `/var/tmp` (the host's, or a unit's private one: namespace 1)
    /// and per user.
    pub anchors: [[Option<u64>; 2]; 2],
    /// The process holding the node's host-wide claim, per network namespace (the host's, or
    /// a unit's own: namespace 1).
    pub host: [Option<u8>; 2],
}

impl FileNode {
    /// The process holding the host-wide claim in `who`'s network namespace.
    pub fn host_of(&self, who: &Who<'_>) -> Option<u8> {
        self.host[usize::from(who.ns)]
    }

    /// The anchors `who` reads and writes: its `/var/tmp`'s.
    pub fn anchors_of(&self, who: &Who<'_>) -> [Option<u64>; 2] {
        self.anchors[usize::from(who.ns)]
    }

    pub fn anchor_mut(&mut self, who: &Who<'_>) -> &mut Option<u64> {
        &mut self.anchors[usize::from(who.ns)][usize::from(who.uid)]
    }
}

/// A remote store's claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Held {
    pub p: u8,
    /// Real time (units) at which the lease expires unless renewed.
    pub expires: u8,
}

/// etcd's keys of one node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct EtcdNode {
    pub claim: Option<Held>,
    pub reservation: Option<u64>,
    /// `restored/<N>/<lease>`: one key per claim (process) that wrote back.
    pub restored: Vec<Option<u64>>,
}

/// PostgreSQL's row of one node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PgRow {
    pub reservation: Option<u64>,
    pub claimant: Option<Held>,
    pub fence: u8,
}

/// The store of the node, as one of the three.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Store {
    File(FileNode),
    Etcd(EtcdNode),
    Pg(Option<PgRow>),
}

/// Parameters the stores need from the world.
#[derive(Clone, Copy, Debug)]
pub struct Env {
    /// Real time, units; and in Unix ms (the store's own clock, where it has one).
    pub t: u8,
    pub t_ms: u64,
    /// A remote lease's time to live, units; and in µs.
    pub ttl: u8,
    pub ttl_us: u64,
    /// How far a holder's clock may lead the store's at a check that confirms, ms.
    pub clock_lead_ms: u64,
}

fn stored(who: &Who<'_>, ms: u64) -> u64 {
    handover::to_stored(who.layout, ms)
}

fn read(who: &Who<'_>, v: Option<u64>) -> Option<u64> {
    v.map(|v| handover::from_stored(who.layout, v))
}

impl Store {
    pub fn new(flavour: Flavour, procs: usize) -> Store {
        match flavour {
            Flavour::File => Store::File(FileNode::default()),
            Flavour::Etcd => Store::Etcd(EtcdNode {
                restored: vec![None; procs],
                ..EtcdNode::default()
            }),
            Flavour::Pg => Store::Pg(None),
        }
    }

    /// Whether the store has a clock of its own.
    pub fn clocked(&self) -> bool {
        !matches!(self, Store::File(_))
    }

    /// Claims the node for `who`, reading its records in the same atomic step; `None` while
    /// another claim holds it.
    pub fn claim(&mut self, who: &Who<'_>, env: &Env) -> Option<ClaimRead> {
        match self {
            Store::File(f) => {
                let dir = &mut f.dirs[usize::from(who.dir)];
                if dir.lock.is_some() || f.host[usize::from(who.ns)].is_some() {
                    return None;
                }
                dir.lock = Some(who.p);
                f.host[usize::from(who.ns)] = Some(who.p);
                let [a0, a1] = f.anchors[usize::from(who.ns)];
                let reserved = handover::reservation_of([
                    read(who, dir.record),
                    read(who, dir.restored),
                    read(who, a0),
                    read(who, a1),
                ]);
                Some(ClaimRead {
                    reserved_ms: reserved,
                    recorded: dir.record.is_some(),
                    store_clock: None,
                })
            }
            Store::Etcd(e) => {
                if e.claim.is_some_and(|h| env.t < h.expires) {
                    return None;
                }
                e.claim = Some(Held {
                    p: who.p,
                    expires: env.t.saturating_add(env.ttl),
                });
                let restored = e.restored.iter().flatten().copied().max();
                let reserved =
                    handover::reservation_of([read(who, e.reservation), read(who, restored)]);
                let recorded = e.reservation.is_some();
                Some(ClaimRead {
                    reserved_ms: reserved,
                    recorded,
                    // etcd reads its clock at a claim that finds no record.
                    store_clock: (!recorded).then_some((env.t_ms, env.clock_lead_ms)),
                })
            }
            Store::Pg(row) => {
                let mut r = row.unwrap_or_default();
                if r.claimant.is_some_and(|h| env.t < h.expires) {
                    return None;
                }
                r.fence = r.fence.saturating_add(1);
                r.claimant = Some(Held {
                    p: who.p,
                    expires: env.t.saturating_add(env.ttl),
                });
                *row = Some(r);
                // A row some claim held before has a fencing counter of at least 1, so this
                // claim's is at least 2; a row a write-back made again starts at 0.
                let recorded = r.fence >= 2 && r.reservation.is_some();
                Some(ClaimRead {
                    reserved_ms: read(who, r.reservation),
                    recorded,
                    store_clock: Some((env.t_ms, env.clock_lead_ms)),
                })
            }
        }
    }

    /// Whether `who`'s claim stands now.
    fn holds(&self, who: &Who<'_>, env: &Env) -> bool {
        match self {
            Store::File(f) => f.dirs[usize::from(who.dir)].lock == Some(who.p),
            Store::Etcd(e) => e.claim.is_some_and(|h| h.p == who.p && env.t < h.expires),
            Store::Pg(row) => row
                .and_then(|r| r.claimant)
                .is_some_and(|h| h.p == who.p && env.t < h.expires),
        }
    }

    /// A renewal, the holder's clock read at `holder_ms` before it was sent: how long the
    /// claim stays valid (µs), `None` for as long as the process lives; and whether it was
    /// refused because the holder's clock was too far ahead of the store's.
    pub fn renew(
        &mut self,
        who: &Who<'_>,
        env: &Env,
        holder_ms: u64,
    ) -> (Result<Option<u64>, Failure>, bool) {
        if !self.holds(who, env) {
            return (Err(Failure::Lost), false);
        }
        if self.clocked()
            && handover::clock_lead_refused(holder_ms, env.t_ms, env.clock_lead_ms).is_some()
        {
            // The store takes the claim of a holder too far ahead of its clock.
            return (Err(Failure::Lost), true);
        }
        let valid = match self {
            Store::File(_) => Ok(None),
            Store::Etcd(e) => {
                if let Some(h) = &mut e.claim {
                    h.expires = env.t.saturating_add(env.ttl);
                }
                Ok(Some(env.ttl_us))
            }
            Store::Pg(row) => {
                if let Some(Held { expires, .. }) = row.as_mut().and_then(|r| r.claimant.as_mut()) {
                    *expires = env.t.saturating_add(env.ttl);
                }
                Ok(Some(env.ttl_us))
            }
        };
        (valid, false)
    }

    /// Writes the reservation `until_ms` under the claim.
    pub fn extend(&mut self, who: &Who<'_>, env: &Env, until_ms: u64) -> Result<(), Failure> {
        if !self.holds(who, env) {
            return Err(Failure::Lost);
        }
        let v = stored(who, until_ms);
        match self {
            Store::File(f) => {
                f.dirs[usize::from(who.dir)].record = Some(v);
                let holds = f.host_of(who) == Some(who.p);
                let anchor = f.anchor_mut(who);
                *anchor = Some(handover::anchor_after(*anchor, v, holds));
            }
            // A transaction compared against the claim's create revision: the key's value.
            Store::Etcd(e) => e.reservation = Some(v),
            Store::Pg(row) => {
                if let Some(r) = row {
                    r.reservation = Some(r.reservation.map_or(v, |old| old.max(v)));
                }
            }
        }
        Ok(())
    }

    /// Reads the node's reservation again, for a claim held.
    pub fn reread(&self, who: &Who<'_>, env: &Env) -> Result<Option<u64>, Failure> {
        if !self.holds(who, env) {
            return Err(Failure::Lost);
        }
        Ok(match self {
            Store::File(f) => {
                let dir = &f.dirs[usize::from(who.dir)];
                let [a0, a1] = f.anchors_of(who);
                handover::reservation_of([
                    read(who, dir.record),
                    read(who, dir.restored),
                    read(who, a0),
                    read(who, a1),
                ])
            }
            Store::Etcd(e) => handover::reservation_of([
                read(who, e.reservation),
                read(who, e.restored.iter().flatten().copied().max()),
            ]),
            Store::Pg(row) => read(who, row.and_then(|r| r.reservation)),
        })
    }

    /// A lost holder's write-back: beside the records, never replacing one; then, on the file
    /// store, the node's host-wide claim is let go.
    pub fn restore(&mut self, who: &Who<'_>, until_ms: u64) {
        let v = stored(who, until_ms);
        match self {
            Store::File(f) => {
                // Into the state directory now at the store's path (made again if missing).
                let dir = &mut f.dirs[usize::from(who.dir)];
                dir.restored = Some(handover::restored(dir.restored, v));
                let holds = f.host_of(who) == Some(who.p);
                let anchor = f.anchor_mut(who);
                *anchor = Some(handover::anchor_after(*anchor, v, holds));
                if holds {
                    f.host[usize::from(who.ns)] = None;
                }
            }
            Store::Etcd(e) => e.restored[usize::from(who.p)] = Some(v),
            Store::Pg(row) => {
                let r = row.get_or_insert(PgRow::default());
                r.reservation = Some(handover::restored(r.reservation, v));
            }
        }
    }

    /// Writes the final reservation under the claim and gives the node up.
    pub fn release(&mut self, who: &Who<'_>, env: &Env, until_ms: u64) -> Result<(), Failure> {
        let v = stored(who, until_ms);
        let held = match self {
            Store::File(_) => self.extend(who, env, until_ms),
            _ => {
                if self.holds_identity(who) {
                    Ok(())
                } else {
                    Err(Failure::Lost)
                }
            }
        };
        match self {
            Store::File(_) => {}
            Store::Etcd(e) => {
                if held.is_ok() && e.claim.is_some_and(|h| h.p == who.p) {
                    e.reservation = Some(v);
                    e.claim = None;
                }
            }
            Store::Pg(row) => {
                if held.is_ok()
                    && let Some(r) = row
                {
                    // `coalesce($5, reserved_until_ms)`: the final reservation replaces it.
                    r.reservation = Some(v);
                    r.claimant = None;
                }
            }
        }
        self.let_go(who);
        held
    }

    /// Whether the store still has this claim's identity (a release is guarded by the claim's
    /// key or token, not by its lease's time).
    fn holds_identity(&self, who: &Who<'_>) -> bool {
        match self {
            Store::File(f) => f.dirs[usize::from(who.dir)].lock == Some(who.p),
            Store::Etcd(e) => e.claim.is_some_and(|h| h.p == who.p),
            Store::Pg(row) => row.and_then(|r| r.claimant).is_some_and(|h| h.p == who.p),
        }
    }

    /// Gives the node up writing nothing.
    pub fn abandon(&mut self, who: &Who<'_>) {
        if let Store::Pg(Some(r)) = self
            && r.claimant.is_some_and(|h| h.p == who.p)
        {
            r.claimant = None;
        }
        if let Store::Etcd(e) = self
            && e.claim.is_some_and(|h| h.p == who.p)
        {
            e.claim = None;
        }
        self.let_go(who);
    }

    /// What a process lets go of when it ends (exit, kill -9): its locks and its host-wide
    /// claim; a remote lease lives out its time.
    pub fn let_go(&mut self, who: &Who<'_>) {
        match self {
            Store::File(f) => {
                let dir = &mut f.dirs[usize::from(who.dir)];
                if dir.lock == Some(who.p) {
                    dir.lock = None;
                }
                if f.host_of(who) == Some(who.p) {
                    f.host[usize::from(who.ns)] = None;
                }
            }
            Store::Etcd(_) | Store::Pg(_) => {}
        }
    }

    /// Records deleted: the file store's state directory `dir` (its lock files with it; the
    /// anchors and the host-wide claim survive), etcd's key prefix, PostgreSQL's row.
    pub fn delete(&mut self, dir: u8) {
        match self {
            Store::File(f) => f.dirs[usize::from(dir)] = Dir::default(),
            Store::Etcd(e) => {
                e.claim = None;
                e.reservation = None;
                e.restored.iter_mut().for_each(|r| *r = None);
            }
            Store::Pg(row) => *row = None,
        }
    }

    /// Whether there is anything to delete in `dir`.
    pub fn has_records(&self, dir: u8) -> bool {
        match self {
            Store::File(f) => {
                let d = &f.dirs[usize::from(dir)];
                d.lock.is_some() || d.record.is_some() || d.restored.is_some()
            }
            Store::Etcd(e) => e.claim.is_some() || e.reservation.is_some(),
            Store::Pg(row) => row.is_some(),
        }
    }

    /// What the store does on its own as time passes: etcd deletes a claim key whose lease
    /// expired. (PostgreSQL keeps an expired claimant in its row: free to claim, and its
    /// token still guards a release.)
    pub fn expire(&mut self, t: u8) {
        if let Store::Etcd(e) = self
            && e.claim.is_some_and(|h| t >= h.expires)
        {
            e.claim = None;
        }
    }
}
