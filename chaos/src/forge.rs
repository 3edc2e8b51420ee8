//! `monoflake-chaos forge`: what another local user did in issue 21, as one command.
//!
//! Run as that user (`setpriv --reuid=65534 …`), it renames a node's lock file away (so the
//! next claimant creates and locks a fresh one while the holder still holds the old inode)
//! and plants a reservation for that node, by default in the present, with a valid checksum:
//! the checksum's key is a constant in the source, so anyone can compute it. A claimant that
//! believes the record starts at once at the present, beside the holder that is still
//! issuing. Each step prints `ok` or the error the operating system gave; the exit code is 0
//! only when every step succeeded (the store let the other user in).

use std::hash::Hasher;
use std::io::Write;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::args::{ForgeArgs, ForgeVersion};

/// The key of the v2 reservation checksum, as the library's source has it.
const SUM_KEYS: (u64, u64) = (0x6d6f_6e6f, 0x0066_6c61_6b65);

/// The text of a reservation file of `version` holding `until_ms`.
pub fn reservation_text(version: ForgeVersion, until_ms: u64) -> String {
    let value = format!("until_ms={until_ms}");
    match version {
        ForgeVersion::V1 => format!("monoflake-reservation v1\n{value}\n"),
        ForgeVersion::V2 => {
            let mut h = siphasher::sip::SipHasher24::new_with_keys(SUM_KEYS.0, SUM_KEYS.1);
            h.write(value.as_bytes());
            format!(
                "monoflake-reservation v2\n{value}\nsum={:016x}\n",
                h.finish()
            )
        }
    }
}

pub fn main(args: &ForgeArgs) -> ExitCode {
    let lock = args.dir.join(format!("node-{}.lock", args.node));
    let moved = args.dir.join(format!(
        "node-{}.lock.moved-{}",
        args.node,
        std::process::id()
    ));
    let until = args.until_ms.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    });
    let record = args.dir.join(format!("node-{}.reservation", args.node));
    let tmp = args.dir.join(format!("forged-{}.tmp", std::process::id()));
    let mut all = true;
    let mut step = |what: &str, result: std::io::Result<()>| match result {
        Ok(()) => println!("forge: {what}: ok"),
        Err(e) => {
            println!("forge: {what}: refused: {e}");
            all = false;
        }
    };
    step(
        &format!("rename {} away", lock.display()),
        std::fs::rename(&lock, &moved),
    );
    step(
        &format!("plant {} (until_ms={until})", record.display()),
        std::fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(reservation_text(args.version, until).as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, &record)),
    );
    let _ = std::fs::remove_file(&tmp);
    if all {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The library reads what `forge` writes as a valid reservation: a file store whose
    /// directory holds a forged v2 record for node 0 claims node 0 starting after it.
    #[test]
    fn a_forged_v2_record_carries_a_checksum_the_library_accepts() {
        let dir = std::env::temp_dir().join(format!("chaos-forge-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = std::sync::Arc::new(monoflake::FileStore::open(&dir).unwrap());
        let layout_dir = dir.join("twitter");
        std::fs::create_dir_all(&layout_dir).unwrap();
        // Half a second ahead: within what a claim accepts, and seen in the IDs.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let until = now + 500;
        std::fs::write(
            layout_dir.join("node-0.reservation"),
            reservation_text(ForgeVersion::V2, until),
        )
        .unwrap();
        let leased = monoflake::Generator::builder(monoflake::Layout::twitter())
            .build_leased(store, monoflake::NodeRequest::Exact(0))
            .unwrap();
        let id = leased.next_id().unwrap();
        let ms = id.parts(leased.layout()).unwrap().unix_ms();
        assert!(
            ms >= until,
            "the forged record was not believed: {ms} < {until}"
        );
        drop(leased);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
