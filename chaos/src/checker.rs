//! The checker: every ID any process printed or served passes through [`Checker::observe`].
//!
//! * It goes to PostgreSQL (`pg.rs`), into its phase's table with a `BIGINT PRIMARY KEY`: a
//!   second row with the same ID is a primary-key conflict, kept with both sources.
//! * It goes to its process's log (`procs/<name>.ids`: the real time it was received, the
//!   stream, the IDs).
//! * Per generator (a *stream*: one `gen` process; one client connection to a `serve` process
//!   between two refusals; one claim of a holder; one forked child) every ID must be greater
//!   than the one before.
//! * Its time must not be ahead of the real time it was received by more than the generator's
//!   `max_lead` (100 ms) plus the furthest its process's clock was stepped ahead while it
//!   lived, plus [`CLOCK_SLACK_MS`].
//! * Per node, two processes never hold it at once: the times stamped by one process on a
//!   node (a *tenure*: its run of IDs on that node, split where it moved to another node, was
//!   silent for [`TENURE_SPLIT_MS`] or its stamps jumped that far) never overlap another
//!   process's on that node. A successor
//!   starts after everything its predecessor could issue (after its reservation, or, with no
//!   record, after `2 × check interval + max_lead`), so an overlap is a duplicate waiting for
//!   two calls to land in one tick with one sequence number — caught whether or not they did.
//! * For the soak's generator slots, a gap of `outage_ms` or more between two receipts is an
//!   outage; `report.rs` asks each to be explained by a fault and bounded.
//!
//! Every layout the run uses makes the Twitter layout's IDs (41 bits of ms from Twitter's
//! epoch, 10 node bits, 12 sequence bits), whatever it is called, so one table per phase
//! holds every ID that could collide.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc::UnboundedSender;

use crate::faketime::Clocks;
use crate::holder::TWITTER_EPOCH_MS;
use crate::pg::Message;

/// `max_lead`: how far ahead of its clock a generator may stamp an ID (the default).
pub const MAX_LEAD_MS: i64 = 100;
/// How far the locked clock may run ahead of the wall clock it follows (it re-anchors every
/// second with a 1 ms tolerance; quanta's calibration drifts by ppm).
pub const CLOCK_SLACK_MS: i64 = 25;
/// Violations kept word for word (all are counted).
const SAMPLES: usize = 50;
/// A process silent on a node for this long may have lost and re-claimed it: its IDs after
/// are another tenure. (The holder waits 500 ms before it claims again, the service 1 s.)
pub const TENURE_SPLIT_MS: i64 = 500;

pub type Src = i32;

/// The time field of a Twitter-shaped ID, in Unix ms.
pub fn unix_ms(id: u64) -> i64 {
    ((id >> 22) + TWITTER_EPOCH_MS) as i64
}

/// The node of a Twitter-shaped ID.
pub fn node_of(id: u64) -> u64 {
    (id >> 12) & 0x3ff
}

/// A process that issued IDs.
#[derive(Debug, Clone)]
pub struct Source {
    pub name: String,
    /// The soak's generator slot it runs in (outages are tracked per slot).
    pub slot: Option<usize>,
    /// Whose clock it runs under (`faketime.rs`).
    pub clock: Option<usize>,
    pub started_ms: i64,
    pub table: usize,
}

/// Violations of one kind: counted, the first few kept.
#[derive(Debug, Default, Clone)]
pub struct Violations {
    pub count: u64,
    pub samples: Vec<String>,
}

impl Violations {
    pub fn add(&mut self, text: impl FnOnce() -> String) {
        self.count += 1;
        if self.samples.len() < SAMPLES {
            self.samples.push(text());
        }
    }
}

/// What one phase (a scenario, or the soak) observed.
#[derive(Debug, Default, Clone)]
pub struct PhaseStats {
    pub ids: u64,
    pub order: Violations,
    pub time: Violations,
    /// Two processes' tenures of one node overlapping in time.
    pub overlap: Violations,
    /// Anything else that must not happen: a hung process, a hung fork child…
    pub other: Violations,
}

/// A generator slot not issuing for `outage_ms` or more.
#[derive(Debug, Clone, Copy)]
pub struct Outage {
    pub slot: usize,
    pub start_ms: i64,
    /// `None`: still out when the run ended.
    pub end_ms: Option<i64>,
}

/// A process's run of IDs on one node: the first and last times stamped.
#[derive(Debug, Clone, Copy)]
struct Tenure {
    src: Src,
    node: u64,
    first: i64,
    last: i64,
    last_recv: i64,
}

#[derive(Debug)]
struct State {
    sources: Vec<Source>,
    logs: Vec<Option<BufWriter<File>>>,
    /// Stream → the last ID it issued.
    streams: HashMap<u64, u64>,
    next_n: i64,
    phases: Vec<PhaseStats>,
    /// Per slot: when it last issued, while outages are tracked.
    last_ok: Vec<Option<i64>>,
    /// Per slot: when it last issued (real ms) and how far its last ID's time was ahead of
    /// that, in ms (negative: behind), tracked or not.
    lead: Vec<Option<(i64, i64)>>,
    tracking: bool,
    outages: Vec<Outage>,
    /// Per source: its tenure under way.
    open: HashMap<Src, Tenure>,
    /// Per table and node: the tenures closed.
    tenures: HashMap<(usize, u64), Vec<Tenure>>,
}

#[derive(Debug)]
pub struct Checker {
    state: Mutex<State>,
    pg: UnboundedSender<Message>,
    clocks: Arc<Clocks>,
    logs_dir: PathBuf,
    outage_ms: i64,
    tables: Vec<String>,
    /// What could not be checked, by what: unterminated last lines, client answers lost.
    unchecked: Mutex<std::collections::BTreeMap<&'static str, u64>>,
}

impl Checker {
    /// Counts `n` outputs that could not be checked (and are reported): an unterminated last
    /// line of a killed process, a request whose answer was lost to a timeout or a dropped
    /// connection.
    pub fn unchecked(&self, what: &'static str, n: u64) {
        *self
            .unchecked
            .lock()
            .expect("unchecked")
            .entry(what)
            .or_insert(0) += n;
    }

    /// The counts of [`Checker::unchecked`].
    pub fn unchecked_counts(&self) -> Vec<(&'static str, u64)> {
        let counts = self.unchecked.lock().expect("unchecked");
        counts.iter().map(|(&k, &v)| (k, v)).collect()
    }

    pub fn new(
        pg: UnboundedSender<Message>,
        clocks: Arc<Clocks>,
        logs_dir: PathBuf,
        outage_ms: i64,
        tables: Vec<String>,
        slots: usize,
    ) -> Checker {
        Checker {
            state: Mutex::new(State {
                sources: Vec::new(),
                logs: Vec::new(),
                streams: HashMap::new(),
                next_n: 0,
                phases: vec![PhaseStats::default(); tables.len()],
                last_ok: vec![None; slots],
                lead: vec![None; slots],
                tracking: false,
                outages: Vec::new(),
                open: HashMap::new(),
                tenures: HashMap::new(),
            }),
            pg,
            clocks,
            logs_dir,
            outage_ms,
            tables,
            unchecked: Mutex::new(std::collections::BTreeMap::new()),
        }
    }

    pub fn table(&self, name: &str) -> usize {
        self.tables
            .iter()
            .position(|t| t == name)
            .unwrap_or_else(|| panic!("no table {name}"))
    }

    /// Registers a process; its IDs are logged in `procs/<name>.ids`.
    pub fn source(&self, source: Source, pid: i32) -> Src {
        let mut st = self.state.lock().expect("checker");
        let src = st.sources.len() as Src;
        let log = File::create(self.logs_dir.join(format!("{}.ids", source.name)))
            .ok()
            .map(BufWriter::new);
        let _ = self.pg.send(Message::Source {
            src,
            name: source.name.clone(),
            pid,
            started_ms: source.started_ms,
        });
        st.sources.push(source);
        st.logs.push(log);
        src
    }

    pub fn source_names(&self) -> Vec<String> {
        let st = self.state.lock().expect("checker");
        st.sources.iter().map(|s| s.name.clone()).collect()
    }

    /// IDs `ids`, in the order issued, received at `recv_ms` from `src` on `stream`.
    pub fn observe(&self, src: Src, stream: u64, recv_ms: i64, ids: &[u64]) {
        if ids.is_empty() {
            return;
        }
        let mut guard = self.state.lock().expect("checker");
        let st = &mut *guard;
        let source = st.sources[src as usize].clone();
        let ahead = self
            .clocks
            .max_offset_ms(source.clock, source.started_ms, recv_ms);
        let bound = recv_ms + MAX_LEAD_MS + CLOCK_SLACK_MS + ahead;
        let phase = &mut st.phases[source.table];
        let mut last = st.streams.get(&stream).copied();
        let (mut rows, mut srcs, mut ns) = (
            Vec::with_capacity(ids.len()),
            Vec::with_capacity(ids.len()),
            Vec::with_capacity(ids.len()),
        );
        for &id in ids {
            if let Some(prev) = last
                && id <= prev
            {
                phase.order.add(|| {
                    format!(
                        "{}: stream {stream}: {id} (node {}, {} ms) after {prev} (node {}, {} ms)",
                        source.name,
                        node_of(id),
                        unix_ms(id),
                        node_of(prev),
                        unix_ms(prev)
                    )
                });
            }
            last = Some(id);
            let t = unix_ms(id);
            if t > bound {
                phase.time.add(|| {
                    format!(
                        "{}: {id} is stamped {t} ms, {} ms after it was received at {recv_ms} \
                         (allowed: {} ms lead + {} ms slack + {} ms clock offset)",
                        source.name,
                        t - recv_ms,
                        MAX_LEAD_MS,
                        CLOCK_SLACK_MS,
                        ahead
                    )
                });
            }
            let node = node_of(id);
            match st.open.get_mut(&src) {
                // A new tenure after a silence, a move to another node, or a jump of the
                // stamps (a clock stepped forward): the times jumped over were never stamped
                // by this process, and another may use them.
                Some(open)
                    if open.node == node
                        && recv_ms - open.last_recv < TENURE_SPLIT_MS
                        && t - open.last < TENURE_SPLIT_MS =>
                {
                    open.first = open.first.min(t);
                    open.last = open.last.max(t);
                    open.last_recv = recv_ms;
                }
                _ => {
                    let fresh = Tenure {
                        src,
                        node,
                        first: t,
                        last: t,
                        last_recv: recv_ms,
                    };
                    if let Some(done) = st.open.insert(src, fresh) {
                        st.tenures
                            .entry((source.table, done.node))
                            .or_default()
                            .push(done);
                    }
                }
            }
            rows.push(id as i64);
            srcs.push(src);
            ns.push(st.next_n);
            st.next_n += 1;
        }
        phase.ids += ids.len() as u64;
        if let Some(last) = last {
            st.streams.insert(stream, last);
        }
        if let Some(Some(log)) = st.logs.get_mut(src as usize) {
            let mut line = format!("{recv_ms} {stream}");
            for id in ids {
                line.push(' ');
                line.push_str(&id.to_string());
            }
            let _ = writeln!(log, "{line}");
        }
        if let (Some(slot), Some(&newest)) = (source.slot, ids.last()) {
            st.lead[slot] = Some((recv_ms, unix_ms(newest) - recv_ms));
        }
        if let Some(slot) = source.slot
            && st.tracking
        {
            if let Some(prev) = st.last_ok[slot]
                && recv_ms - prev >= self.outage_ms
            {
                st.outages.push(Outage {
                    slot,
                    start_ms: prev,
                    end_ms: Some(recv_ms),
                });
            }
            st.last_ok[slot] = Some(recv_ms.max(st.last_ok[slot].unwrap_or(0)));
        }
        let _ = self.pg.send(Message::Rows {
            table: source.table,
            ids: rows,
            srcs,
            ns,
        });
    }

    /// Closes the tenures of `table`'s processes and counts, in its phase, every two of
    /// different processes that overlap on a node; returns how many.
    pub fn check_tenures(&self, table: usize) -> u64 {
        let mut guard = self.state.lock().expect("checker");
        let st = &mut *guard;
        let sources: Vec<Src> = st
            .open
            .keys()
            .copied()
            .filter(|src| st.sources[*src as usize].table == table)
            .collect();
        for src in sources {
            if let Some(done) = st.open.remove(&src) {
                st.tenures.entry((table, done.node)).or_default().push(done);
            }
        }
        let mut found = 0;
        let mut nodes: Vec<u64> = st
            .tenures
            .keys()
            .filter(|(t, _)| *t == table)
            .map(|(_, n)| *n)
            .collect();
        nodes.sort_unstable();
        for node in nodes {
            let mut list = st.tenures.remove(&(table, node)).unwrap_or_default();
            list.sort_by_key(|t| (t.first, t.last));
            for (i, a) in list.iter().enumerate() {
                for b in &list[i + 1..] {
                    if b.first > a.last {
                        break;
                    }
                    if a.src != b.src {
                        found += 1;
                        let name = |s: Src| st.sources[s as usize].name.clone();
                        st.phases[table].overlap.add(|| {
                            format!(
                                "node {node} held at once: {} stamped {}..{} and {} stamped {}..{}",
                                name(a.src),
                                a.first,
                                a.last,
                                name(b.src),
                                b.first,
                                b.last
                            )
                        });
                    }
                }
            }
        }
        found
    }

    /// Something that must not happen, in `table`'s phase.
    pub fn violation(&self, table: usize, text: String) {
        let mut st = self.state.lock().expect("checker");
        st.phases[table].other.add(|| text);
    }

    /// Outages are tracked from now on, from each slot's next ID.
    pub fn track_outages(&self) {
        let mut st = self.state.lock().expect("checker");
        st.tracking = true;
        st.last_ok.iter_mut().for_each(|l| *l = None);
    }

    /// Stops tracking at `end_ms`: a slot silent for `outage_ms` by then is still out (or
    /// never issued: its outage starts at `since_ms`).
    pub fn close_outages(&self, since_ms: i64, end_ms: i64) -> Vec<Outage> {
        let mut st = self.state.lock().expect("checker");
        st.tracking = false;
        for slot in 0..st.last_ok.len() {
            let last = st.last_ok[slot].unwrap_or(since_ms);
            if end_ms - last >= self.outage_ms {
                st.outages.push(Outage {
                    slot,
                    start_ms: last,
                    end_ms: None,
                });
            }
        }
        st.outages.clone()
    }

    /// When slot `slot` last issued (real ms), and how far ahead of that its newest ID's time
    /// was (ms).
    pub fn lead(&self, slot: usize) -> Option<(i64, i64)> {
        self.state
            .lock()
            .expect("checker")
            .lead
            .get(slot)
            .copied()
            .flatten()
    }

    /// When each slot last issued.
    pub fn last_ok(&self) -> Vec<Option<i64>> {
        self.state.lock().expect("checker").last_ok.clone()
    }

    pub fn phases(&self) -> Vec<PhaseStats> {
        self.state.lock().expect("checker").phases.clone()
    }

    pub fn flush_logs(&self) {
        let mut st = self.state.lock().expect("checker");
        for log in st.logs.iter_mut().flatten() {
            let _ = log.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checker() -> (
        Checker,
        tokio::sync::mpsc::UnboundedReceiver<Message>,
        PathBuf,
    ) {
        let dir = std::env::temp_dir().join(format!(
            "chaos-checker-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let clocks = Arc::new(Clocks::new(&dir));
        let c = Checker::new(tx, clocks, dir.clone(), 1000, vec!["t".into()], 1);
        (c, rx, dir)
    }

    fn register(c: &Checker, name: &str, slot: Option<usize>) -> Src {
        c.source(
            Source {
                name: name.into(),
                slot,
                clock: None,
                started_ms: 0,
                table: 0,
            },
            1,
        )
    }

    fn id_at(ms: i64, node: u64, seq: u64) -> u64 {
        ((ms as u64 - TWITTER_EPOCH_MS) << 22) | (node << 12) | seq
    }

    #[test]
    fn an_id_not_above_its_streams_last_is_counted_and_named() {
        let (c, _rx, dir) = checker();
        let src = register(&c, "g", None);
        let t = 1_700_000_000_000;
        c.observe(src, 1, t, &[id_at(t, 3, 0), id_at(t, 3, 1)]);
        c.observe(src, 1, t, &[id_at(t, 3, 1)]);
        // Another stream may go lower: a new generator.
        c.observe(src, 2, t, &[id_at(t - 5, 3, 0)]);
        let p = &c.phases()[0];
        assert_eq!((p.ids, p.order.count, p.time.count), (4, 1, 0));
        assert!(
            p.order.samples[0].contains("node 3"),
            "{:?}",
            p.order.samples
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_id_stamped_past_the_lead_is_a_time_violation() {
        let (c, _rx, dir) = checker();
        let src = register(&c, "g", None);
        let t = 1_700_000_000_000;
        let edge = t + MAX_LEAD_MS + CLOCK_SLACK_MS;
        c.observe(src, 1, t, &[id_at(edge, 0, 0)]);
        c.observe(src, 1, t, &[id_at(edge + 1, 0, 0)]);
        assert_eq!(c.phases()[0].time.count, 1);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn two_processes_stamping_one_node_over_one_time_are_an_overlap_taking_turns_is_not() {
        let (c, _rx, dir) = checker();
        let source = |name: &str| register(&c, name, None);
        let (a, b, d) = (source("a"), source("b"), source("d"));
        let t = 1_700_000_000_000;
        // a holds node 1, then node 2; b takes node 1 after a left it: in turn.
        c.observe(a, 1, t, &[id_at(t, 1, 0), id_at(t + 5, 1, 0)]);
        c.observe(a, 1, t + 10, &[id_at(t + 10, 2, 0)]);
        c.observe(b, 2, t + 20, &[id_at(t + 20, 1, 0), id_at(t + 40, 1, 0)]);
        // a comes back to node 1 after b (a new tenure: it moved away in between).
        c.observe(a, 3, t + 50, &[id_at(t + 50, 1, 0)]);
        // e's clock jumped an hour ahead on node 3; f stamped node 3 in the hour between:
        // e never did, so that is no overlap.
        let (e, f) = (source("e"), source("f"));
        c.observe(e, 5, t, &[id_at(t, 3, 0), id_at(t + 3_600_000, 3, 0)]);
        c.observe(f, 6, t + 100, &[id_at(t + 1_000, 3, 0)]);
        // d stamps node 2 inside a's tenure of it, with another sequence number: no
        // duplicate, an overlap all the same.
        c.observe(d, 4, t + 900, &[id_at(t + 10, 2, 7)]);
        assert_eq!(c.check_tenures(0), 1);
        let p = &c.phases()[0];
        assert_eq!(p.overlap.count, 1);
        assert!(
            p.overlap.samples[0].starts_with("node 2 held at once: a"),
            "{:?}",
            p.overlap.samples
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_gap_of_outage_ms_is_an_outage_and_a_silent_slot_is_open_at_the_end() {
        let (c, mut rx, dir) = checker();
        let src = register(&c, "g", Some(0));
        let t = 1_700_000_000_000;
        c.observe(src, 1, t, &[id_at(t, 0, 0)]);
        c.track_outages();
        c.observe(src, 1, t + 10, &[id_at(t + 10, 0, 0)]);
        c.observe(src, 1, t + 900, &[id_at(t + 900, 0, 0)]);
        c.observe(src, 1, t + 2900, &[id_at(t + 2900, 0, 0)]);
        let outages = c.close_outages(t, t + 4000);
        assert_eq!(outages.len(), 2, "{outages:?}");
        assert_eq!(
            (outages[0].start_ms, outages[0].end_ms),
            (t + 900, Some(t + 2900))
        );
        assert_eq!((outages[1].start_ms, outages[1].end_ms), (t + 2900, None));
        // Every ID went to the database with a distinct row number.
        let mut ns = Vec::new();
        while let Ok(m) = rx.try_recv() {
            if let Message::Rows { ns: n, .. } = m {
                ns.extend(n);
            }
        }
        assert_eq!(ns, vec![0, 1, 2, 3]);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
