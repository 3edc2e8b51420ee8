//! What users reach for: string encodings, opaque IDs, serde, stats, the one-line start.

use std::sync::Arc;

use monoflake::{Encoding, Error, Generator, Id, Layout, ManualClock, Opaque, OpaqueKey, PRESETS};
use proptest::prelude::*;

const FIXED: [Encoding; 3] = [Encoding::Hex, Encoding::Base32, Encoding::Base62];

proptest! {
    #[test]
    fn fixed_width_encodings_preserve_order(a in any::<u64>(), b in any::<u64>()) {
        for e in FIXED {
            let (sa, sb) = (Id::from_u64(a).encode(e), Id::from_u64(b).encode(e));
            prop_assert_eq!(sa.len(), e.width().unwrap());
            prop_assert_eq!(sa.as_bytes().cmp(sb.as_bytes()), a.cmp(&b), "{:?}: {} vs {}", e, sa, sb);
        }
    }

    #[test]
    fn every_encoding_round_trips(v in any::<u64>()) {
        for e in Encoding::ALL {
            let s = Id::from_u64(v).encode(e);
            prop_assert_eq!(Id::decode(&s, e).unwrap().as_u64(), v);
        }
        // Case does not matter where the alphabet allows it.
        let s = Id::from_u64(v).encode(Encoding::Base32).to_lowercase();
        prop_assert_eq!(Id::decode(&s, Encoding::Base32).unwrap().as_u64(), v);
        let s = Id::from_u64(v).encode(Encoding::Hex).to_uppercase();
        prop_assert_eq!(Id::decode(&s, Encoding::Hex).unwrap().as_u64(), v);
    }

    #[test]
    fn opaque_round_trips_for_every_preset(v in any::<u64>(), key in any::<[u8; 16]>()) {
        for name in PRESETS {
            let layout = Layout::preset(name).unwrap();
            let o = Opaque::new(&layout, OpaqueKey::from_bytes(key));
            let id = Id::from_u64(if layout.total_bits() == 64 { v } else { v >> (64 - layout.total_bits()) });
            let public = o.encrypt(id).unwrap();
            prop_assert!(layout.total_bits() == 64 || public.as_u64() >> layout.total_bits() == 0);
            prop_assert_eq!(o.decrypt(public).unwrap(), id);
        }
    }
}

#[test]
fn encoding_errors_name_the_character_and_position() {
    let msg = |s: &str, e| Id::decode(s, e).unwrap_err().to_string();
    assert_eq!(
        msg("0123456789U12", Encoding::Base32),
        "invalid ID \"0123456789U12\": not a base32 character 'U' at position 10"
    );
    assert_eq!(
        msg("0Czks0tP3-X", Encoding::Base62),
        "invalid ID \"0Czks0tP3-X\": not a base62 character '-' at position 9"
    );
    assert_eq!(
        msg("0271065ac102000g", Encoding::Hex),
        "invalid ID \"0271065ac102000g\": not a hex digit 'g' at position 15"
    );
    assert!(msg("04W86BB0G400", Encoding::Base32).contains("exactly 13 characters"));
    assert!(msg("LygHa16AHYG", Encoding::Base62).contains("larger than 18446744073709551615"));
    assert!(msg("G000000000000", Encoding::Base32).contains("larger than"));
    assert!(msg("0Czks0tP37é", Encoding::Base62).contains("position 10"));
    // Crockford's look-alikes read as digits.
    assert_eq!(
        Id::decode("0000000000OIL", Encoding::Base32)
            .unwrap()
            .as_u64(),
        0b00001_00001
    );
    assert_eq!(
        Id::from_u64(u64::MAX).encode(Encoding::Base62).to_string(),
        "LygHa16AHYF"
    );
}

#[test]
fn consecutive_ids_lose_their_order_when_opaque() {
    // A sign test: if the permutation kept any order, "next > previous" would hold far more
    // (or less) often than half the time.
    let layout = Layout::twitter();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let g = Generator::builder(layout.clone())
        .clock(Arc::clone(&clock))
        .node(3)
        .build()
        .unwrap();
    let o = Opaque::new(
        &layout,
        OpaqueKey::from_hex("8f1e4c2a9b7d6e5f0a1b2c3d4e5f6071").unwrap(),
    );
    let mut prev = o.encrypt(g.next_id().unwrap()).unwrap();
    let (mut up, n) = (0, 20_000);
    for i in 0..n {
        if i % 7 == 0 {
            clock.advance_ms(1);
        }
        let next = o.encrypt(g.next_id().unwrap()).unwrap();
        up += u32::from(next > prev);
        prev = next;
    }
    // Under the null hypothesis up ~ Binomial(20000, 1/2): sd ≈ 71; 5 sd ≈ 354.
    assert!(
        (9_646..=10_354).contains(&up),
        "{up} of {n} consecutive opaque IDs increased"
    );
    // The parts do not survive either: the time of an opaque ID is not the time of the ID.
    let id = g.next_id().unwrap();
    // (An `OpaqueId` has no parts; read as an ID's number, its time is not the ID's.)
    let p = Id::from_u64(o.encrypt(id).unwrap().as_u64())
        .parts(&layout)
        .unwrap();
    assert_ne!(p.tick(), id.parts(&layout).unwrap().tick());
}

#[test]
fn generated_keys_are_random_and_round_trip_through_hex() {
    let keys: Vec<OpaqueKey> = (0..64).map(|_| OpaqueKey::generate().unwrap()).collect();
    for (i, key) in keys.iter().enumerate() {
        assert!(keys[..i].iter().all(|other| other != key), "a repeated key");
        let hex = key.to_hex();
        assert_eq!(hex.len(), 32);
        assert!(
            hex.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(OpaqueKey::from_hex(&hex).unwrap(), *key);
        assert_eq!(
            OpaqueKey::from_file_contents(format!("{hex}\n").as_bytes()).unwrap(),
            *key
        );
        assert_eq!(OpaqueKey::from_bytes(key.to_bytes()), *key);
    }
    // Every bit of the 128 is used: across 64 keys each is set in some and clear in others.
    let (mut ones, mut zeros) = ([false; 128], [false; 128]);
    for key in &keys {
        for (i, byte) in key.to_bytes().iter().enumerate() {
            for bit in 0..8 {
                let set = byte >> bit & 1 == 1;
                ones[i * 8 + bit] |= set;
                zeros[i * 8 + bit] |= !set;
            }
        }
    }
    assert!(ones.iter().chain(&zeros).all(|&seen| seen));
}

#[test]
fn public_ids_are_written_and_read_like_ids() {
    let layout = Layout::discord();
    let o = Opaque::new(&layout, OpaqueKey::from_bytes([5; 16]));
    let id = layout.compose_at(1_700_000_000_000, 7, 3).unwrap();
    let public = o.encrypt(id).unwrap();
    assert_eq!(public.to_string(), public.as_u64().to_string());
    assert_eq!(
        public.to_string().parse::<monoflake::OpaqueId>().unwrap(),
        public
    );
    for encoding in [
        Encoding::Decimal,
        Encoding::Hex,
        Encoding::Base32,
        Encoding::Base62,
    ] {
        let text = public.encode(encoding);
        assert_eq!(&*text, &*Id::from_u64(public.as_u64()).encode(encoding));
        assert_eq!(
            monoflake::OpaqueId::decode(&text, encoding).unwrap(),
            public
        );
    }
    assert!(matches!(
        "12x".parse::<monoflake::OpaqueId>(),
        Err(monoflake::Error::InvalidId {
            position: Some(2),
            ..
        })
    ));
    assert_eq!(o.decrypt(public).unwrap(), id);
}

#[test]
fn opaque_ids_differ_by_key_and_bad_keys_are_refused() {
    let layout = Layout::twitter();
    let id = layout.compose(1000, 1, 1).unwrap();
    let a = Opaque::new(&layout, OpaqueKey::from_bytes([1; 16]))
        .encrypt(id)
        .unwrap();
    let b = Opaque::new(&layout, OpaqueKey::from_bytes([2; 16]))
        .encrypt(id)
        .unwrap();
    assert_ne!(a, b);
    for bad in [
        "",
        "0123",
        "zz112233445566778899aabbccddeeff",
        "00112233445566778899aabbccddeeff00",
    ] {
        assert!(
            matches!(OpaqueKey::from_hex(bad), Err(Error::InvalidKey { .. })),
            "{bad:?}"
        );
    }
}

#[cfg(feature = "serde")]
mod serde_tests {
    use monoflake::Id;

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Order {
        id: Id,
        #[serde(with = "monoflake::as_u64")]
        raw: Id,
    }

    #[test]
    fn ids_are_strings_in_json_and_numbers_only_when_safe() {
        let order = Order {
            id: Id::from_u64(175_928_847_299_117_063),
            raw: Id::from_u64(u64::MAX),
        };
        let json = serde_json::to_string(&order).unwrap();
        assert_eq!(
            json,
            r#"{"id":"175928847299117063","raw":18446744073709551615}"#
        );
        assert_eq!(serde_json::from_str::<Order>(&json).unwrap(), order);
        // Boundaries: 2^53 - 1 is accepted as a number, 2^53 is refused with the reason.
        assert_eq!(
            serde_json::from_str::<Id>("9007199254740991")
                .unwrap()
                .as_u64(),
            (1 << 53) - 1
        );
        let err = serde_json::from_str::<Id>("9007199254740992")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("above 2^53 - 1") && err.contains("send IDs as strings"),
            "{err}"
        );
        // Strings hold the whole range, 0 to u64::MAX.
        for v in [0, 1, (1 << 53) - 1, 1 << 53, u64::MAX] {
            let s = serde_json::to_string(&Id::from_u64(v)).unwrap();
            assert_eq!(s, format!("\"{v}\""));
            assert_eq!(serde_json::from_str::<Id>(&s).unwrap().as_u64(), v);
        }
        for bad in [
            "\"12x\"",
            "-1",
            "1.5",
            "\"\"",
            "\"18446744073709551616\"",
            "null",
        ] {
            assert!(serde_json::from_str::<Id>(bad).is_err(), "{bad} accepted");
        }
        let err = serde_json::from_str::<Id>("\"12x\"")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not a decimal digit 'x' at position 2"),
            "{err}"
        );
    }

    /// A public ID travels as an ID does (a string in JSON, a u64 in bincode), and a struct
    /// that holds one cannot be filled from a private `Id` by mistake: only the key maps one
    /// to the other.
    #[test]
    fn public_ids_serialize_as_ids_do() {
        use monoflake::{Layout, Opaque, OpaqueId, OpaqueKey};

        #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
        struct Public {
            id: OpaqueId,
        }
        let o = Opaque::new(&Layout::twitter(), OpaqueKey::from_bytes([8; 16]));
        let id = Layout::twitter()
            .compose_at(1_700_000_000_000, 1, 0)
            .unwrap();
        let public = Public {
            id: o.encrypt(id).unwrap(),
        };
        let json = serde_json::to_string(&public).unwrap();
        assert_eq!(json, format!(r#"{{"id":"{}"}}"#, public.id));
        assert_eq!(serde_json::from_str::<Public>(&json).unwrap(), public);
        let bytes = bincode::serialize(&public).unwrap();
        assert_eq!(bytes, public.id.as_u64().to_le_bytes());
        assert_eq!(bincode::deserialize::<Public>(&bytes).unwrap(), public);
        assert!(serde_json::from_str::<Public>(r#"{"id":"12x"}"#).is_err());
        assert!(serde_json::from_str::<Public>(r#"{"id":9007199254740992}"#).is_err());
    }

    /// bincode is not self-describing: an `Id` is a plain u64 there, and reads back, over the
    /// whole range, inside a struct too.
    #[test]
    fn ids_round_trip_through_a_binary_format() {
        for v in [
            0,
            1,
            (1 << 53) - 1,
            1 << 53,
            175_928_847_299_117_063,
            u64::MAX,
        ] {
            let bytes = bincode::serialize(&Id::from_u64(v)).unwrap();
            assert_eq!(bytes, v.to_le_bytes());
            assert_eq!(bincode::deserialize::<Id>(&bytes).unwrap().as_u64(), v);
        }
        let order = Order {
            id: Id::from_u64(u64::MAX - 1),
            raw: Id::from_u64(7),
        };
        let bytes = bincode::serialize(&order).unwrap();
        assert_eq!(bincode::deserialize::<Order>(&bytes).unwrap(), order);
        assert!(bincode::deserialize::<Id>(&[1, 2, 3]).is_err());
    }
}

#[test]
fn stats_count_what_happened() {
    let layout = Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .sequence_bits(2)
        .build()
        .unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let g = Generator::builder(layout)
        .clock(Arc::clone(&clock))
        .max_lead(std::time::Duration::from_millis(2))
        .max_wait(std::time::Duration::from_millis(5))
        .build()
        .unwrap();
    // Ticks +0 and +1 whole, then the last tick the lead allows is paced: at this clock's
    // reading (the start of its tick) only its first slot is open. Two ticks borrowed.
    for _ in 0..9 {
        g.try_next_id().unwrap();
    }
    assert!(g.try_next_id().is_err()); // would block
    assert!(g.next_id().is_err()); // waits, then gives up
    clock.advance_ms(10); // a jump: values passed over are not counted as issued
    g.try_next_id().unwrap();
    let batch: Vec<Id> = g.try_next_ids(6).unwrap().collect();
    assert_eq!(batch.len(), 6);
    let s = g.stats();
    assert_eq!(s.issued, 16);
    assert_eq!(s.borrowed_ticks, 3); // ticks +1, +2, and the batch's carry into the next tick
    assert_eq!(s.max_lead_ticks, 2);
    // One refusal returned; one waiting call that spun, yielded, slept and gave up.
    assert_eq!(
        (s.would_block_returned, s.waiting_calls, s.timed_out),
        (1, 1, 1),
        "{s:?}"
    );
    assert_eq!((s.wait_spins, s.wait_yields), (6, 10), "{s:?}");
    assert!(s.wait_sleeps >= 1, "{s:?}");
    assert_eq!(s.wait_retries, 16 + s.wait_sleeps, "{s:?}");
    assert!(
        s.to_string()
            .starts_with("issued 16, borrowed ticks 3 (max lead 2)"),
        "{s}"
    );
}

#[test]
fn stats_of_a_leased_generator_include_the_store() {
    let dir = std::env::temp_dir().join(format!("monoflake-test-stats-{}", std::process::id()));
    let store = Arc::new(monoflake::FileStore::open(&dir).unwrap());
    let leased = Generator::builder(Layout::twitter())
        .build_leased(store, monoflake::NodeRequest::Any)
        .unwrap();
    for _ in 0..1000 {
        leased.next_id().unwrap();
    }
    let s = leased.stats();
    leased.release().unwrap();
    assert_eq!(s.issued, 1000, "{s:?}");
    assert!(s.reservation_writes >= 1 && s.lease_renewals >= 1, "{s:?}");
    assert_eq!((s.reservation_failures, s.lease_losses), (0, 0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_one_line_start_reports_failure_as_an_error_then_works() {
    // The default state directory cannot be made: a file stands where a directory should.
    let dir = std::env::temp_dir().join(format!("monoflake-test-global-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let blocked = dir.join("blocked");
    std::fs::write(&blocked, "").unwrap();
    let path = blocked.clone();
    monoflake::configure_default(move || {
        Generator::builder(Layout::js_safe()).build_leased(
            Arc::new(monoflake::FileStore::open(&path)?),
            monoflake::NodeRequest::Any,
        )
    })
    .unwrap();
    assert!(matches!(monoflake::next_id(), Err(Error::StateDir { .. })));
    // Fixed: the next call builds it.
    std::fs::remove_file(&blocked).unwrap();
    let a = monoflake::next_id().unwrap();
    let b = monoflake::next_id().unwrap();
    assert!(b > a);
    assert_eq!(
        monoflake::default_generator().unwrap().layout().name(),
        "js-safe"
    );
    assert!(matches!(
        monoflake::configure_default(|| unreachable!()),
        Err(Error::DefaultAlreadyBuilt)
    ));
    let _ = std::fs::remove_dir_all(&dir);
}
