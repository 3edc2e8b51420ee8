//! Judging the outages, and the figures of the report.
//!
//! An outage of a slot is **explained** when a fault that could cause it (one on that slot,
//! or on its store: an etcd fault for an etcd slot, a state-directory or disk fault for a file
//! slot) began no later than `outage_ms` after the slot last issued, and **bounded** when it
//! ended within `recovery_ms` of the end of the faults that explain it (overlapping windows
//! `[start, end + recovery_ms]` are merged: faults in a row explain an outage together). An
//! outage still open when the run ended is a hung generator.

use std::collections::BTreeMap;

use crate::checker::Outage;
use crate::nemesis::{FaultKind, Record};

/// An outage and what the judge made of it.
#[derive(Debug, Clone)]
pub struct Judged {
    pub outage: Outage,
    pub duration_ms: i64,
    /// A fault that could cause it began in time.
    pub explained: bool,
    /// It ended within the recovery bound of the faults that explain it.
    pub bounded: bool,
}

impl Judged {
    pub fn ok(&self) -> bool {
        self.explained && self.bounded && self.outage.end_ms.is_some()
    }
}

/// The windows `[start, end + recovery]` of the faults that affect `slot`, merged.
fn windows(slot: usize, records: &[Record], recovery_ms: i64) -> Vec<(i64, i64)> {
    let mut w: Vec<(i64, i64)> = records
        .iter()
        .filter(|r| r.affects.contains(&slot))
        .map(|r| (r.start_ms, r.end_ms + recovery_ms))
        .collect();
    w.sort_unstable();
    let mut merged: Vec<(i64, i64)> = Vec::new();
    for (s, e) in w {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// Judges every outage; `end_ms` stands for the end of one still open.
pub fn judge(
    outages: &[Outage],
    records: &[Record],
    outage_ms: i64,
    recovery_ms: i64,
    end_ms: i64,
) -> Vec<Judged> {
    outages
        .iter()
        .map(|o| {
            let end = o.end_ms.unwrap_or(end_ms);
            let w = windows(o.slot, records, recovery_ms);
            let explaining = w
                .iter()
                .find(|(s, e)| *s <= o.start_ms + outage_ms && *e >= o.start_ms);
            Judged {
                outage: *o,
                duration_ms: end - o.start_ms,
                explained: explaining.is_some(),
                bounded: explaining.is_some_and(|(_, e)| end <= *e),
            }
        })
        .collect()
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One row of the outage table: a fault kind.
#[derive(Debug, Clone)]
pub struct KindRow {
    pub kind: FaultKind,
    pub faults: usize,
    /// (fault, affected slot) pairs.
    pub pairs: usize,
    /// Pairs in which the slot had an outage.
    pub with_outage: usize,
    pub p50: i64,
    pub p99: i64,
    pub max: i64,
}

/// The fault an outage is put down to: of the faults on its slot whose window
/// `[start, end + recovery_ms]` reaches the outage's start, the last one to begin no later
/// than `outage_ms` after it (the most recent cause).
fn cause(o: &Outage, records: &[Record], outage_ms: i64, recovery_ms: i64) -> Option<usize> {
    records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.affects.contains(&o.slot))
        .filter(|(_, r)| {
            r.start_ms <= o.start_ms + outage_ms && r.end_ms + recovery_ms >= o.start_ms
        })
        .max_by_key(|(_, r)| r.start_ms)
        .map(|(i, _)| i)
}

/// Per fault kind: for every slot a fault could affect, the outage of that slot put down to
/// that fault ([`cause`]; the longest if several), 0 when none.
pub fn per_kind(
    records: &[Record],
    outages: &[Outage],
    outage_ms: i64,
    recovery_ms: i64,
    end_ms: i64,
) -> Vec<KindRow> {
    let caused: Vec<(Option<usize>, usize, i64)> = outages
        .iter()
        .map(|o| {
            (
                cause(o, records, outage_ms, recovery_ms),
                o.slot,
                o.end_ms.unwrap_or(end_ms) - o.start_ms,
            )
        })
        .collect();
    let mut by_kind: BTreeMap<FaultKind, (usize, Vec<i64>)> = BTreeMap::new();
    for (i, r) in records.iter().enumerate() {
        let entry = by_kind.entry(r.kind).or_default();
        entry.0 += 1;
        for &slot in &r.affects {
            let longest = caused
                .iter()
                .filter(|(c, s, _)| *c == Some(i) && *s == slot)
                .map(|(_, _, d)| *d)
                .max()
                .unwrap_or(0);
            entry.1.push(longest);
        }
    }
    by_kind
        .into_iter()
        .map(|(kind, (faults, mut d))| {
            d.sort_unstable();
            KindRow {
                kind,
                faults,
                pairs: d.len(),
                with_outage: d.iter().filter(|&&x| x > 0).count(),
                p50: percentile(&d, 50.0),
                p99: percentile(&d, 99.0),
                max: d.last().copied().unwrap_or(0),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: FaultKind, start: i64, end: i64, affects: &[usize]) -> Record {
        Record {
            kind,
            start_ms: start,
            end_ms: end,
            slot: affects[0],
            affects: affects.to_vec(),
            effect: Ok(String::new()),
        }
    }

    fn outage(slot: usize, start: i64, end: Option<i64>) -> Outage {
        Outage {
            slot,
            start_ms: start,
            end_ms: end,
        }
    }

    #[test]
    fn an_outage_needs_a_fault_on_its_slot_in_time_and_an_end_in_bound() {
        let records = [
            record(FaultKind::Pause, 10_000, 14_000, &[0]),
            record(FaultKind::EtcdQuorum, 50_000, 52_000, &[1, 2]),
        ];
        let outages = [
            // The pause explains it: began 300 ms after the slot's last ID.
            outage(0, 9_700, Some(20_000)),
            // Slot 1 was not paused.
            outage(1, 9_700, Some(12_000)),
            // The quorum loss, but the outage outlasts end + recovery (52 s + 15 s).
            outage(2, 50_100, Some(68_000)),
            // Silent two seconds before the fault: not explained by it.
            outage(1, 48_000, Some(53_000)),
            // Still out at the end.
            outage(0, 13_000, None),
        ];
        let j = judge(&outages, &records, 1000, 15_000, 90_000);
        let flags: Vec<(bool, bool, bool)> =
            j.iter().map(|j| (j.explained, j.bounded, j.ok())).collect();
        assert_eq!(
            flags,
            [
                (true, true, true),
                (false, false, false),
                (true, false, false),
                (false, false, false),
                (true, false, false),
            ]
        );
        assert_eq!(j[4].duration_ms, 77_000);
    }

    #[test]
    fn faults_in_a_row_explain_an_outage_together() {
        let records = [
            record(FaultKind::EtcdMember, 0, 4_000, &[1]),
            record(FaultKind::EtcdPrefix, 18_000, 18_100, &[1]),
        ];
        let j = judge(
            &[outage(1, 500, Some(30_000))],
            &records,
            1000,
            15_000,
            40_000,
        );
        assert!(j[0].ok(), "{j:?}");
    }

    #[test]
    fn the_table_counts_every_affected_slot_and_takes_nearest_rank_percentiles() {
        let records = [
            record(FaultKind::Kill9, 1_000, 1_000, &[0]),
            record(FaultKind::Kill9, 5_000, 5_000, &[1]),
            record(FaultKind::EtcdPrefix, 9_000, 9_000, &[0, 1, 2]),
        ];
        let outages = [outage(0, 900, Some(2_400)), outage(2, 9_100, Some(12_100))];
        let rows = per_kind(&records, &outages, 1000, 15_000, 20_000);
        let kill = rows.iter().find(|r| r.kind == FaultKind::Kill9).unwrap();
        assert_eq!((kill.faults, kill.pairs, kill.with_outage), (2, 2, 1));
        assert_eq!((kill.p50, kill.max), (0, 1_500));
        let prefix = rows
            .iter()
            .find(|r| r.kind == FaultKind::EtcdPrefix)
            .unwrap();
        assert_eq!(
            (prefix.pairs, prefix.with_outage, prefix.max),
            (3, 1, 3_000)
        );
        // Two faults on one slot: the outage is put down to the later one only.
        let records = [
            record(FaultKind::StateDirDelete, 1_000, 1_000, &[0]),
            record(FaultKind::Pause, 3_000, 7_000, &[0]),
        ];
        let rows = per_kind(
            &records,
            &[outage(0, 2_900, Some(7_500))],
            1000,
            15_000,
            9_000,
        );
        let max: Vec<(FaultKind, i64)> = rows.iter().map(|r| (r.kind, r.max)).collect();
        assert_eq!(
            max,
            [(FaultKind::Pause, 4_600), (FaultKind::StateDirDelete, 0)]
        );
        assert_eq!(percentile(&[1, 2, 3, 4], 50.0), 2);
        assert_eq!(percentile(&[1, 2, 3, 4], 99.0), 4);
    }
}
