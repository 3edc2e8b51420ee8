//! Layouts and IDs: published examples decode exactly; bad layouts and inputs get exact errors.

use monoflake::{Error, Id, Layout, PRESETS, rfc3339};
use proptest::prelude::*;

#[test]
fn discord_documentation_examples_decode_exactly() {
    let layout = Layout::discord();
    let p = Id::from_u64(175_928_847_299_117_063)
        .parts(&layout)
        .unwrap();
    assert_eq!(p.rfc3339(), "2016-04-30T11:18:25.796Z");
    assert_eq!(
        (p.field("worker"), p.field("process"), p.sequence()),
        (Some(1), Some(0), 7)
    );

    let p = Id::from_u64(90_339_695_967_350_784).parts(&layout).unwrap();
    assert_eq!(p.unix_ms(), 1_441_609_061_949);
    assert_eq!((p.field("process"), p.sequence()), (Some(3), 0));
}

#[test]
fn twitter_published_examples_decode_exactly() {
    let layout = Layout::twitter();
    // Wikipedia's "Snowflake ID" article: a tweet by @Wikipedia, 2022-06-28 16:07:40.105 UTC,
    // machine 378 (0b01_0111_1010), sequence 0.
    let p = Id::from_u64(1_541_815_603_606_036_480)
        .parts(&layout)
        .unwrap();
    assert_eq!(p.unix_ms(), 1_656_432_460_105);
    assert_eq!(p.rfc3339(), "2022-06-28T16:07:40.105Z");
    assert_eq!(
        (p.node(), p.field("datacenter"), p.field("worker")),
        (378, Some(11), Some(26))
    );
    assert_eq!(p.sequence(), 0);
    // A tweet decoded in a blog post: 453125752965 ms after the epoch, machine 422.
    let p = Id::from_u64(1_900_547_158_165_840_235)
        .parts(&layout)
        .unwrap();
    assert_eq!(p.tick(), 453_125_752_965);
    assert_eq!(p.unix_ms(), 1_741_960_727_622);
    assert_eq!(p.node(), 422);
}

#[test]
fn sonyflake_places_the_machine_below_the_sequence() {
    // sony/sonyflake composes elapsed << (8 + 16) | sequence << 16 | machine.
    let layout = Layout::sonyflake();
    let raw = 123_456_789u64 << 24 | 0xAB << 16 | 0x1234;
    let p = Id::from_u64(raw).parts(&layout).unwrap();
    assert_eq!(
        (p.tick(), p.sequence(), p.node()),
        (123_456_789, 0xAB, 0x1234)
    );
    assert_eq!(p.unix_ms(), 1_409_529_600_000 + 1_234_567_890);
    assert_eq!(
        layout.compose(123_456_789, 0x1234, 0xAB).unwrap().as_u64(),
        raw
    );
}

#[test]
fn lifetimes() {
    let ends: Vec<String> = PRESETS
        .iter()
        .map(|n| rfc3339(Layout::preset(n).unwrap().expires_at_ms())[..10].to_owned())
        .collect();
    assert_eq!(
        ends,
        [
            "2080-07-10",
            "2154-05-15",
            "2188-11-16",
            "2024-11-20",
            "2089-10-26",
            "2092-01-19"
        ]
    );
}

#[test]
fn js_safe_ids_stay_below_2_pow_53_for_the_whole_lifetime() {
    let layout = Layout::js_safe();
    let last = layout
        .compose(layout.max_tick(), layout.max_node(), layout.max_sequence())
        .unwrap();
    assert_eq!(last.as_u64(), (1 << 53) - 1);
    assert!(matches!(
        Id::from_u64(1 << 53).parts(&layout),
        Err(Error::IdTooWide {
            layout_bits: 53,
            ..
        })
    ));
}

#[test]
fn the_73_bit_game_server_layout_is_refused_with_its_numbers() {
    let err = Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .time_bits(37)
        .node_field("server", 20)
        .sequence_bits(16)
        .build()
        .unwrap_err();
    assert!(matches!(
        err,
        Error::LayoutTooWide {
            time_bits: 37,
            node_bits: 20,
            sequence_bits: 16,
            total: 73,
            max: 63,
            ..
        }
    ));
    let msg = err.to_string();
    for number in ["73", "37", "20", "16", "63", "10 bits for the node fields"] {
        assert!(msg.contains(number), "{msg:?} lacks {number}");
    }
}

#[test]
fn invalid_layouts_get_exact_errors() {
    let b = Layout::builder;
    assert!(
        matches!(b().sequence_bits(0).build(), Err(Error::ZeroBits { field, .. }) if field == "sequence")
    );
    assert!(
        matches!(b().time_bits(0).build(), Err(Error::ZeroBits { field, .. }) if field == "time")
    );
    assert!(
        matches!(b().node_field("w", 0).build(), Err(Error::ZeroBits { field, .. }) if field == "w")
    );
    assert!(matches!(b().tick_ms(0).build(), Err(Error::ZeroTick)));
    // A node field wider than time and sequence leave.
    assert!(matches!(
        b().node_field("dc", 5).node_field("worker", 6).build(),
        Err(Error::LayoutTooWide {
            total: 64,
            max: 63,
            node_bits: 11,
            ..
        })
    ));
    assert!(
        b().node_field("dc", 5)
            .node_field("worker", 6)
            .allow_sign_bit(true)
            .epoch("2024-01-01")
            .build()
            .is_ok()
    );
    assert!(matches!(
        b().node_field("w", u32::MAX).build(),
        Err(Error::LayoutTooWide { max: 63, .. })
    ));
    let future = 4_102_444_800_000; // 2100-01-01
    assert!(matches!(
        b().epoch_ms(future).build(),
        Err(Error::EpochInFuture {
            epoch_ms: 4_102_444_800_000,
            ..
        })
    ));
    for bad in ["", "Worker", "1st", "a-b", "time", "sequence"] {
        assert!(
            matches!(b().node_field(bad, 3).build(), Err(Error::InvalidFieldName { ref name, .. }) if name == bad),
            "{bad:?} accepted"
        );
    }
    assert!(matches!(
        b().node_field("w", 3).node_field("w", 3).build(),
        Err(Error::InvalidFieldName { .. })
    ));
    assert!(matches!(
        Layout::preset("snowflake"),
        Err(Error::UnknownPreset { .. })
    ));
    // The epoch: required, read from text or a SystemTime, never silently Twitter's.
    assert!(matches!(b().build(), Err(Error::MissingEpoch)));
    assert!(b().build().unwrap_err().to_string().contains("no epoch"));
    let at = |text: &str| b().epoch(text).build().map(|l| l.epoch_ms());
    assert_eq!(at("2024-01-01").unwrap(), 1_704_067_200_000);
    assert_eq!(
        at(" 2016-05-20T08:00:00+08:00\n").unwrap(),
        1_463_702_400_000
    );
    assert_eq!(at("1288834974657").unwrap(), Layout::twitter().epoch_ms());
    for bad in [
        "",
        "yesterday",
        "2024-13-01",
        "2024-01-01T00:00:00",
        "1969-12-31",
    ] {
        match at(bad) {
            Err(Error::InvalidEpoch { input, reason, .. }) => {
                assert_eq!(input, bad);
                assert!(reason.contains("RFC 3339"), "{bad:?}: {reason}");
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    let since = |ms: u64| std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    let l = b().epoch_at(since(1_582_136_402_123)).build().unwrap();
    assert_eq!(l.epoch_ms(), 1_582_136_402_123);
    // Rounded down to the millisecond.
    let finer = since(1_582_136_402_123) + std::time::Duration::from_nanos(999_999);
    assert_eq!(
        b().epoch_at(finer).build().unwrap().epoch_ms(),
        1_582_136_402_123
    );
    let before_1970 = std::time::UNIX_EPOCH - std::time::Duration::from_secs(1);
    assert!(matches!(
        b().epoch_at(before_1970).build(),
        Err(Error::InvalidEpoch { .. })
    ));
    assert!(matches!(
        b().epoch_at(since(4_102_444_800_000)).build(),
        Err(Error::EpochInFuture { .. })
    ));
    // The last epoch given counts.
    assert!(b().epoch("nonsense").epoch_ms(0).build().is_ok());
}

#[test]
fn compose_is_range_checked() {
    let l = Layout::twitter();
    let e = |r: Result<Id, Error>| match r {
        Err(Error::OutOfRange {
            field, value, max, ..
        }) => (field, value, max),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        e(l.compose(1 << 41, 0, 0)),
        ("time".to_owned(), 1 << 41, (1 << 41) - 1)
    );
    assert_eq!(e(l.compose(0, 1024, 0)), ("node".to_owned(), 1024, 1023));
    assert_eq!(
        e(l.compose(0, 0, 4096)),
        ("sequence".to_owned(), 4096, 4095)
    );
    assert!(l.compose_at(l.epoch_ms() - 1, 0, 0).is_err());
}

#[test]
fn id_parsing_errors_name_the_problem() {
    let err = |s: &str| match s.parse::<Id>() {
        Err(Error::InvalidId {
            reason, position, ..
        }) => (reason, position),
        other => panic!("{s:?} gave {other:?}"),
    };
    assert_eq!(err(""), ("empty string", None));
    assert_eq!(err("12a4"), ("not a decimal digit", Some(2)));
    assert_eq!(err("-1"), ("not a decimal digit", Some(0)));
    assert_eq!(err(" 1"), ("not a decimal digit", Some(0)));
    assert_eq!(
        err("18446744073709551616").0,
        "larger than 18446744073709551615"
    );
    assert_eq!(
        "18446744073709551615".parse::<Id>().unwrap().as_u64(),
        u64::MAX
    );
    assert!(matches!(
        Id::from_u64(u64::MAX).to_i64(),
        Err(Error::SignBitSet { id: u64::MAX, .. })
    ));
}

fn any_layout() -> impl Strategy<Value = Layout> {
    (1u32..=41, 0u32..=12, 1u32..=22, any::<bool>(), 1u64..=1000).prop_filter_map(
        "fits",
        |(time, node, seq, low, tick)| {
            let mut b = Layout::builder()
                .epoch_ms(Layout::twitter().epoch_ms())
                .time_bits(time)
                .sequence_bits(seq)
                .tick_ms(tick);
            if node > 0 {
                b = b.node_field("n", node).node_below_sequence(low);
            }
            b.build().ok()
        },
    )
}

proptest! {
    #[test]
    fn compose_then_parts_round_trips(layout in any_layout(), t in any::<u64>(), n in any::<u64>(), s in any::<u64>()) {
        let (t, n, s) = (t & layout.max_tick(), n & layout.max_node(), s & layout.max_sequence());
        let id = layout.compose(t, n, s).unwrap();
        let p = id.parts(&layout).unwrap();
        prop_assert_eq!((p.tick(), p.node(), p.sequence()), (t, n, s));
        prop_assert_eq!(p.unix_ms(), layout.epoch_ms() + t * layout.tick_ms());
        prop_assert_eq!(id.to_string().parse::<Id>().unwrap(), id);
    }

    #[test]
    fn decimal_round_trips(v in any::<u64>()) {
        prop_assert_eq!(Id::from_u64(v).to_string().parse::<Id>().unwrap().as_u64(), v);
    }

    #[test]
    fn rfc3339_matches_the_standard_library(ms in 0u64..=253_402_300_799_999) {
        // Check the civil-date arithmetic against day counting from the epoch.
        let s = rfc3339(ms);
        let (y, m, d) = (s[0..4].parse::<i64>().unwrap(), s[5..7].parse::<i64>().unwrap(), s[8..10].parse::<i64>().unwrap());
        let days_from_civil = |y: i64, m: i64, d: i64| {
            let y = if m <= 2 { y - 1 } else { y };
            let era = y.div_euclid(400);
            let yoe = y - era * 400;
            let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
            let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
            era * 146_097 + doe - 719_468
        };
        prop_assert_eq!(days_from_civil(y, m, d), (ms / 86_400_000) as i64);
        prop_assert_eq!(&s[20..23], format!("{:03}", ms % 1000));
    }
}

/// A layout is read exactly as written: a stray space (`--layout "twitter "` from a shell
/// variable) is refused with the byte it is at, not trimmed away.
#[test]
fn layouts_with_spaces_are_refused_not_trimmed() {
    for text in [
        "twitter ",
        " twitter",
        "time=41, worker=10,sequence=12,epoch=2024-01-01",
        "time=41,worker=10,sequence=12,epoch=2024-01-01\n",
        "time=41,worker =10,sequence=12,epoch=2024-01-01",
        "tw\titter",
    ] {
        match text.parse::<Layout>() {
            Err(e @ Error::InvalidLayoutSpec { .. }) => {
                let at = text.find(char::is_whitespace).unwrap();
                assert!(
                    e.to_string().contains(&format!("at byte {at}")),
                    "{text:?}: {e}"
                );
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
    assert_eq!("twitter".parse::<Layout>().unwrap(), Layout::twitter());
}
