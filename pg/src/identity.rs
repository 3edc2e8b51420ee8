//! What tells this server from a copy of it — and how little does.
//!
//! A physical copy of a data directory (`pg_basebackup`, a file-system or VM snapshot, a
//! restored backup) carries everything in it: `pg_control` (the system identifier and the
//! timeline), every table, the reservation file. Nothing in it can prove that it is the
//! original (`docs/postgres-extension.md`, "A copy is not its original"), so:
//!
//! * a claimed node comes from a claim database outside this data directory (`claimdb.rs`
//!   refuses one with this server's system identifier);
//! * a server in recovery (a standby, a restore in progress) issues nothing ([`in_recovery`]);
//! * a configured node (`monoflake.node`) is tied to the history of the data directory that
//!   used it: the reservation file records the node, the timeline and the base backup this
//!   directory was restored from ([`Identity`]), and a server whose timeline or base backup
//!   differs from what was recorded with the same node refuses ([`copied`]) — the traces a
//!   promotion, a point-in-time restore and a `pg_basebackup` leave. A copy that leaves no
//!   trace (a snapshot, `cp -a` of a stopped server) cannot be told from its original: a
//!   configured node is then the operator's promise alone.

use std::fs::File;
use std::io::{self, Read};
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};

use pgrx::pg_sys;

/// The file PostgreSQL leaves after starting from a base backup (`backup_label`, renamed
/// once recovery has read it; the next restore replaces it).
const BACKUP_LABEL_OLD: &str = "backup_label.old";

/// Whether the server is in recovery: a standby, or a start still replaying WAL.
pub(crate) fn in_recovery() -> bool {
    // SAFETY: reads the server's shared recovery state (a spinlock-protected word, cached
    // by the process once it reads "done"); callable from any backend, on its one thread.
    unsafe { pg_sys::RecoveryInProgress() }
}

/// This server's system identifier (`pg_control`; the same in every copy and standby).
pub(crate) fn system_identifier() -> u64 {
    // SAFETY: reads the control file's copy in shared memory, set up by the postmaster
    // before any worker starts and never changed after.
    unsafe { pg_sys::GetSystemIdentifier() }
}

/// The timeline WAL is written on. Only once recovery is over ([`in_recovery`] false).
fn timeline() -> u32 {
    // SAFETY: after recovery the insertion timeline is fixed for the server's life
    // (PostgreSQL reads it without a lock); the caller checked that recovery is over.
    unsafe { pg_sys::GetWALInsertionTimeLine() }
}

/// The base backup this data directory was restored from (`backup_label.old`: its start
/// location and time), `None` when it was not.
fn restored_from() -> Result<Option<String>, String> {
    let mut text = String::new();
    match File::open(BACKUP_LABEL_OLD) {
        Ok(mut f) => f
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read {BACKUP_LABEL_OLD}: {e}"))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open {BACKUP_LABEL_OLD}: {e}")),
    };
    Ok(Some(backup_of(&text)))
}

/// A base backup's label in one line: `START WAL LOCATION` and `START TIME`
/// (`0/2000028 2025-06-01 10:00:00 UTC`), or its first line when it has neither.
fn backup_of(label: &str) -> String {
    let field = |name: &str| {
        label
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let location = field("START WAL LOCATION:").and_then(|v| v.split_whitespace().next());
    match (location, field("START TIME:")) {
        (Some(location), Some(time)) => format!("{location} {time}"),
        (Some(location), None) => location.to_owned(),
        _ => label.lines().next().unwrap_or("").trim().to_owned(),
    }
}

/// The history a configured node was used under: recorded in the reservation file as one
/// line, `node 7 timeline 1 backup none` or `node 7 timeline 2 backup 0/2000028 <time>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    node: u64,
    timeline: u32,
    /// The base backup the data directory was restored from, if it was.
    backup: Option<String>,
}

impl Identity {
    /// This server now, issuing under `node`: after recovery only.
    pub(crate) fn current(node: u64) -> Result<Identity, String> {
        Ok(Identity {
            node,
            timeline: timeline(),
            backup: restored_from()?,
        })
    }

    /// The line the reservation file holds.
    pub(crate) fn line(&self) -> String {
        format!(
            "node {} timeline {} backup {}",
            self.node,
            self.timeline,
            self.backup.as_deref().unwrap_or("none")
        )
    }

    /// Reads [`Identity::line`]'s text; `None` when it is not one.
    pub(crate) fn parse(line: &str) -> Option<Identity> {
        let rest = line.strip_prefix("node ")?;
        let (node, rest) = rest.split_once(" timeline ")?;
        let (timeline, backup) = rest.split_once(" backup ")?;
        Some(Identity {
            node: node.parse().ok()?,
            timeline: timeline.parse().ok()?,
            backup: (backup != "none").then(|| backup.to_owned()),
        })
    }
}

/// Why this data directory, issuing as `now`, is a copy of the one that recorded `then`
/// under the same node; `None` when nothing says so (another node, or the same history).
pub(crate) fn copied(then: &Identity, now: &Identity) -> Option<String> {
    if then.node != now.node {
        return None;
    }
    let node = now.node;
    if then.timeline != now.timeline {
        return Some(format!(
            "this server is on timeline {}, but node {node} was last used in this data \
             directory on timeline {}: the server was promoted (or restored to a point in \
             time) since, and the server it was copied from may still issue under node {node}",
            now.timeline, then.timeline
        ));
    }
    if then.backup != now.backup {
        return Some(format!(
            "this data directory was restored from a base backup (backup_label.old: {}) \
             since node {node} was last used in it{}: it is a copy, and the server it was \
             copied from may still issue under node {node}",
            now.backup.as_deref().unwrap_or("none"),
            then.backup
                .as_deref()
                .map(|b| format!(" (then restored from {b})"))
                .unwrap_or_default()
        ));
    }
    None
}

/// The room for an identity line in shared memory.
const LINE_BYTES: usize = 160;

/// The identity line the reservation file carries, in shared memory: written by the
/// postmaster before any backend exists, then only by the holder of the reservation
/// writer's flag (`shared.rs`), and read under it.
#[repr(C)]
pub(crate) struct IdentityCell {
    /// 0: not checked yet since the start; 1: checked, the line is this server's.
    pub(crate) checked: AtomicU32,
    len: AtomicU32,
    bytes: [AtomicU8; LINE_BYTES],
}

impl IdentityCell {
    /// An unchecked cell holding `line` (cut at the room: an identity line is far shorter).
    pub(crate) fn new(line: &str) -> IdentityCell {
        let cell = IdentityCell {
            checked: AtomicU32::new(0),
            len: AtomicU32::new(0),
            bytes: [const { AtomicU8::new(0) }; LINE_BYTES],
        };
        cell.set(line);
        cell
    }

    /// Replaces the line (under the writer's flag).
    pub(crate) fn set(&self, line: &str) {
        let bytes = &line.as_bytes()[..line.len().min(LINE_BYTES)];
        // Ordering: Relaxed; the writer's flag (Acquire/Release) orders these for the next
        // holder, the only reader.
        for (cell, b) in self.bytes.iter().zip(bytes) {
            cell.store(*b, Ordering::Relaxed);
        }
        self.len.store(bytes.len() as u32, Ordering::Relaxed);
    }

    /// The line (under the writer's flag).
    pub(crate) fn get(&self) -> String {
        // Ordering: Relaxed; see `set`.
        let len = self.len.load(Ordering::Relaxed) as usize;
        let bytes: Vec<u8> = self.bytes[..len.min(LINE_BYTES)]
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_back() {
        for id in [
            Identity {
                node: 7,
                timeline: 1,
                backup: None,
            },
            Identity {
                node: 1023,
                timeline: 12,
                backup: Some("0/2000028 2025-06-01 10:00:00 UTC".into()),
            },
        ] {
            assert_eq!(Identity::parse(&id.line()), Some(id));
        }
        assert_eq!(Identity::parse("node x timeline 1 backup none"), None);
        assert_eq!(Identity::parse(""), None);
    }

    #[test]
    fn a_label_is_its_start() {
        let label = "START WAL LOCATION: 0/2000028 (file 000000010000000000000002)\n\
                     CHECKPOINT LOCATION: 0/2000060\nBACKUP METHOD: streamed\n\
                     BACKUP FROM: primary\nSTART TIME: 2025-06-01 10:00:00 UTC\n\
                     LABEL: pg_basebackup base backup\nSTART TIMELINE: 1\n";
        assert_eq!(backup_of(label), "0/2000028 2025-06-01 10:00:00 UTC");
        assert_eq!(backup_of("odd\nlabel"), "odd");
    }

    #[test]
    fn a_copy_is_told_by_its_timeline_or_its_backup() {
        let original = Identity {
            node: 7,
            timeline: 1,
            backup: None,
        };
        let promoted = Identity {
            timeline: 2,
            ..original.clone()
        };
        let restored = Identity {
            backup: Some("0/2000028 2025-06-01 10:00:00 UTC".into()),
            ..original.clone()
        };
        let elsewhere = Identity {
            node: 8,
            ..promoted.clone()
        };
        assert_eq!(copied(&original, &original), None);
        assert!(copied(&original, &promoted).unwrap().contains("timeline 2"));
        assert!(copied(&original, &restored).unwrap().contains("0/2000028"));
        assert_eq!(copied(&original, &elsewhere), None);
    }
}
