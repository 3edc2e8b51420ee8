//! The holder's life, step by step, with exact values: what each event leads to.

use super::*;
use crate::Layout;
use crate::handover::Limits;

const NOW: u64 = 1_700_000_000_000;

fn layout() -> Layout {
    Layout::twitter()
}

fn terms(layout: &Layout) -> Terms<'_> {
    Terms {
        layout,
        limits: Limits {
            max_lead_ms: 100,
            tolerance_ms: 5_200,
            unrecorded_wait_ms: 250,
            trust: false,
        },
        window_ms: 5_000,
        check_us: 100_000,
    }
}

fn recorded(ms: u64) -> ClaimRead {
    ClaimRead {
        reserved_ms: Some(ms),
        recorded: true,
        store_clock: None,
    }
}

/// A holder that claimed a node released just now and built its generator at `NOW`, the
/// keeper waiting for its first round; `valid_us` as the store said.
fn holding(terms: &Terms<'_>, valid_us: Option<u64>) -> Holder {
    let (mut h, action) = Holder::claim(terms, recorded(NOW - 3), NOW);
    assert_eq!(action, Action::Renew);
    let at = Now {
        ms: NOW,
        mono_us: 0,
    };
    let action = h.step(
        terms,
        Event::Renewed {
            at,
            result: Ok(valid_us),
            last_tick: 0,
            store: None,
        },
    );
    assert_eq!(
        action,
        Action::Extend {
            until_ms: NOW + 5_000
        }
    );
    let action = h.step(terms, Event::Extended(Ok(())));
    assert!(matches!(action, Action::Build { .. }), "{action:?}");
    let interval = (terms.window_ms * 1_000 / 4).min(terms.check_us);
    assert_eq!(h.step(terms, Event::Done), Action::Idle { us: interval });
    h
}

/// The build's first fence: the last tick before the first reservation, a deadline two
/// checks after the first renewal less the margin, and a start after the record's tick.
#[test]
fn the_build_fences_its_generator_from_its_first_check_and_reservation() {
    let layout = layout();
    let terms = terms(&layout);
    let (mut h, _) = Holder::claim(&terms, recorded(NOW + 40), NOW);
    let at = Now {
        ms: NOW,
        mono_us: 0,
    };
    let renewed = Event::Renewed {
        at,
        result: Ok(None),
        last_tick: 0,
        store: None,
    };
    // 40 ms ahead, within max_lead: started at the record's tick.
    assert_eq!(
        h.step(&terms, renewed),
        Action::Extend {
            until_ms: NOW + 40 + 5_000
        }
    );
    assert_eq!(
        h.step(&terms, Event::Extended(Ok(()))),
        Action::Build {
            resume_after: Some(layout.tick_at(NOW + 40) - 1),
            limit: layout.tick_at(NOW + 5_040) - 1,
            // 200 ms left of the bound: a margin of 2 ms.
            deadline: layout.tick_at(NOW + 198) + 1,
        }
    );
}

/// The fence's deadline, to the millisecond: what is left of the lease and of the confirm
/// bound, less a margin of 2 ms and 1 ms per 500 ms left; never past the confirming check's
/// clock plus the bound; none for a lease without a deadline; 0 once lost.
#[test]
fn the_fence_deadline_is_what_is_left_less_the_margin() {
    let layout = layout();
    // Checks every second: the confirm bound is 2 s.
    let terms = Terms {
        check_us: 1_000_000,
        ..terms(&layout)
    };
    let mut h = holding(&terms, None);
    h.renewed(
        &terms,
        Now {
            ms: 1_000_000,
            mono_us: 0,
        },
        None,
        None,
    );
    let at = |ms, mono_us| Now { ms, mono_us };
    // 2,000 ms left of the bound: a margin of 2 + 4 ms.
    assert_eq!(h.fence_deadline_ms(&terms, at(1_000_000, 0)), 1_001_994);
    // 1,500 ms later by the monotonic clock, 500 ms left: a margin of 2 + 1 ms.
    assert_eq!(
        h.fence_deadline_ms(&terms, at(1_001_500, 1_500_000)),
        1_001_997
    );
    // The clock stepped 10 s forward since the check: the check's clock plus the bound.
    let mut fresh = holding(&terms, None);
    fresh.confirmed_clock_ms = 1_000_000;
    assert_eq!(fresh.fence_deadline_ms(&terms, at(1_010_000, 0)), 1_002_000);
    // A lease valid for 1 s from the check: its 1,000 ms left, a margin of 2 + 2 ms.
    fresh.renewed(&terms, at(1_000_000, 0), Some(1_000_000), None);
    assert_eq!(fresh.fence_deadline_ms(&terms, at(1_000_000, 0)), 1_000_996);
    // A lease valid for 10 minutes and a check every 10 minutes: a margin of 2 + 1,200.
    let long = Terms {
        check_us: 600_000_000,
        ..terms
    };
    let mut h = holding(&long, Some(600_000_000));
    h.confirmed_clock_ms = 0;
    h.renewed(&long, at(5_000_000, 0), Some(600_000_000), None);
    assert_eq!(h.fence_deadline_ms(&long, at(5_000_000, 0)), 5_598_798);
    // Lost: 0, whatever else holds.
    h.lease_deadline_us = 0;
    assert_eq!(h.fence_deadline_ms(&long, at(5_000_000, 0)), 0);
}

/// Never confirmed: no issuing at all.
#[test]
fn an_unconfirmed_lease_has_a_deadline_of_zero() {
    let layout = layout();
    let terms = terms(&layout);
    let (h, _) = Holder::claim(&terms, recorded(NOW), NOW);
    assert_eq!(
        h.fence_deadline_ms(
            &terms,
            Now {
                ms: NOW,
                mono_us: 0
            }
        ),
        0
    );
}

/// A round that finds the claim gone seals, writes back the end of the last tick once, says
/// so — and never writes back again: not at a later round, not at the release, which lets
/// go writing nothing (a second write-back after the host-wide claim is let go could lower
/// what a successor has raised since: issue 54, case 1).
#[test]
fn a_loss_is_written_back_exactly_once() {
    let layout = layout();
    let terms = terms(&layout);
    let mut h = holding(&terms, None);
    assert_eq!(h.step(&terms, Event::Round), Action::Renew);
    let at = Now {
        ms: NOW + 100,
        mono_us: 100_000,
    };
    let lost = Event::Renewed {
        at,
        result: Err(Failure::Lost),
        last_tick: 7,
        store: None,
    };
    assert_eq!(h.step(&terms, lost), Action::Seal { releasing: false });
    let last = layout.tick_at(NOW + 50);
    let end = layout.unix_ms_of_tick(last + 1);
    assert_eq!(
        h.step(&terms, Event::Sealed { last_tick: last }),
        Action::WriteBack { until_ms: end }
    );
    assert_eq!(
        h.step(&terms, Event::WrittenBack(Ok(()))),
        Action::Lost {
            why: Loss::Renewal,
            unwritten: false
        }
    );
    assert_eq!(h.lease_deadline_us(), 0);
    assert_eq!(h.step(&terms, Event::Done), Action::Idle { us: 100_000 });
    // Later rounds: nothing to do.
    assert_eq!(h.step(&terms, Event::Round), Action::Idle { us: 100_000 });
    // The release: nothing written.
    assert_eq!(
        h.step(&terms, Event::Stop),
        Action::End {
            let_go: LetGo::Abandon,
            outcome: Outcome::Lost
        }
    );
    assert!(h.ended());
}

/// A write-back that fails is retried at every round and at the release until it is
/// acknowledged; one still failing at the release keeps the claim (the file store's
/// host-wide claim refuses a successor on this host until the process exits).
#[test]
fn a_failed_write_back_is_retried_until_acknowledged() {
    let layout = layout();
    let terms = terms(&layout);
    let mut h = holding(&terms, None);
    h.step(&terms, Event::Round);
    let at = Now {
        ms: NOW + 100,
        mono_us: 100_000,
    };
    h.step(
        &terms,
        Event::Renewed {
            at,
            result: Err(Failure::Lost),
            last_tick: 0,
            store: None,
        },
    );
    let last = layout.tick_at(NOW);
    let end = layout.unix_ms_of_tick(last + 1);
    assert_eq!(
        h.step(&terms, Event::Sealed { last_tick: last }),
        Action::WriteBack { until_ms: end }
    );
    assert_eq!(
        h.step(&terms, Event::WrittenBack(Err(Failure::Failed))),
        Action::Lost {
            why: Loss::Renewal,
            unwritten: true
        }
    );
    h.step(&terms, Event::Done);
    // Each round retries it, and nothing else.
    for _ in 0..3 {
        assert_eq!(
            h.step(&terms, Event::Round),
            Action::WriteBack { until_ms: end }
        );
        assert_eq!(
            h.step(&terms, Event::WrittenBack(Err(Failure::Failed))),
            Action::Idle { us: 100_000 }
        );
    }
    // At the release, once more; still failing, the claim is kept.
    let mut kept = h.clone();
    assert_eq!(
        kept.step(&terms, Event::Stop),
        Action::WriteBack { until_ms: end }
    );
    assert_eq!(
        kept.step(&terms, Event::WrittenBack(Err(Failure::Failed))),
        Action::End {
            let_go: LetGo::Keep,
            outcome: Outcome::Unwritten
        }
    );
    // Acknowledged at a round: never again, and the release writes nothing.
    assert_eq!(
        h.step(&terms, Event::Round),
        Action::WriteBack { until_ms: end }
    );
    assert_eq!(
        h.step(&terms, Event::WrittenBack(Ok(()))),
        Action::Idle { us: 100_000 }
    );
    assert_eq!(h.step(&terms, Event::Round), Action::Idle { us: 100_000 });
    assert_eq!(
        h.step(&terms, Event::Stop),
        Action::End {
            let_go: LetGo::Abandon,
            outcome: Outcome::Lost
        }
    );
}

/// A reservation write that fails is not adopted: the fence keeps the last acknowledged
/// reservation's limit (adopted, a killed holder's successor would start under it).
#[test]
fn a_failed_extension_leaves_the_limit_where_the_store_has_it() {
    let layout = layout();
    let terms = terms(&layout);
    let mut h = holding(&terms, None);
    h.step(&terms, Event::Round);
    // 3 s later the reservation (NOW + 5 s) has less than half a window left.
    let at = Now {
        ms: NOW + 3_000,
        mono_us: 3_000_000,
    };
    let last_tick = layout.tick_at(NOW + 3_000);
    assert_eq!(
        h.step(
            &terms,
            Event::Renewed {
                at,
                result: Ok(None),
                last_tick,
                store: None,
            }
        ),
        Action::Extend {
            until_ms: NOW + 3_001 + 5_000
        }
    );
    let Action::Fence { limit, .. } = h.step(&terms, Event::Extended(Err(Failure::Failed))) else {
        panic!("no fence");
    };
    assert_eq!(limit, layout.tick_at(NOW + 5_000) - 1);
    assert!(h.failing());
    assert_eq!(h.reserved_ms(), NOW + 5_000);
}

/// A release writes the end of the last tick issued under the claim, never below what the
/// claim read; one whose write finds the claim gone writes it back once and lets go
/// writing nothing more.
#[test]
fn a_release_writes_the_end_of_the_last_tick() {
    let layout = layout();
    let terms = terms(&layout);
    let mut h = holding(&terms, None);
    assert_eq!(
        h.step(&terms, Event::Stop),
        Action::Seal { releasing: true }
    );
    let last = layout.tick_at(NOW + 20);
    let end = layout.unix_ms_of_tick(last + 1);
    assert_eq!(
        h.step(&terms, Event::Sealed { last_tick: last }),
        Action::Extend { until_ms: end }
    );
    let mut gone = h.clone();
    assert_eq!(
        h.step(&terms, Event::Extended(Ok(()))),
        Action::End {
            let_go: LetGo::Release { until_ms: end },
            outcome: Outcome::Released
        }
    );
    assert_eq!(
        gone.step(&terms, Event::Extended(Err(Failure::Lost))),
        Action::WriteBack { until_ms: end }
    );
    assert_eq!(
        gone.step(&terms, Event::WrittenBack(Ok(()))),
        Action::End {
            let_go: LetGo::Abandon,
            outcome: Outcome::Lost
        }
    );
    // Nothing issued: the release keeps the reservation the claim read.
    let mut idle = holding(&terms, None);
    idle.step(&terms, Event::Stop);
    assert_eq!(
        idle.step(&terms, Event::Sealed { last_tick: 0 }),
        Action::Extend { until_ms: NOW - 3 }
    );
}

/// A node with no record: the claimant waits the unrecorded wait, renewing (a claim that
/// expires outlives it), reads the records again and starts above them and the wait's
/// floor; a reservation beyond the tolerance is refused; a layout past its end cannot start.
#[test]
fn a_claimant_waits_renewing_rereads_and_refuses_beyond_the_tolerance() {
    let layout = layout();
    let terms = terms(&layout);
    let unrecorded = ClaimRead {
        reserved_ms: None,
        recorded: false,
        store_clock: None,
    };
    let (mut h, action) = Holder::claim(&terms, unrecorded, NOW);
    assert_eq!(
        action,
        Action::Sleep {
            ms: 250,
            renew_every_ms: Some(100)
        }
    );
    assert_eq!(h.step(&terms, Event::Waited(Ok(()))), Action::Reread);
    // A write-back of a holder 100 ms ahead turned up: start above it and the floor.
    let reread = Event::Reread {
        result: Ok(Some(NOW + 400)),
        now_ms: NOW + 250,
    };
    assert_eq!(
        h.step(&terms, reread),
        Action::Sleep {
            ms: 50,
            renew_every_ms: Some(100)
        }
    );
    let (mut failed, _) = Holder::claim(&terms, unrecorded, NOW);
    assert_eq!(
        failed.step(&terms, Event::Waited(Err(Failure::Lost))),
        Action::End {
            let_go: LetGo::Abandon,
            outcome: Outcome::Failed(Failure::Lost)
        }
    );
    let (_, refused) = Holder::claim(&terms, recorded(NOW + 6_000), NOW);
    assert_eq!(
        refused,
        Action::End {
            let_go: LetGo::Abandon,
            outcome: Outcome::Refused { ahead_ms: 6_000 }
        }
    );
    let (mut late, _) = Holder::claim(&terms, recorded(0), layout.expires_at_ms());
    let at = Now {
        ms: layout.expires_at_ms(),
        mono_us: 0,
    };
    assert_eq!(
        late.step(
            &terms,
            Event::Renewed {
                at,
                result: Ok(None),
                last_tick: 0,
                store: None,
            }
        ),
        Action::End {
            let_go: LetGo::Abandon,
            outcome: Outcome::Exhausted
        }
    );
}

/// A lease not renewed within its validity is lost: sealed and written back like a claim
/// the store says is gone.
#[test]
fn a_lease_past_its_validity_is_lost() {
    let layout = layout();
    let terms = terms(&layout);
    let mut h = holding(&terms, Some(300_000));
    h.step(&terms, Event::Round);
    let at = Now {
        ms: NOW + 400,
        mono_us: 400_000,
    };
    assert_eq!(
        h.step(
            &terms,
            Event::Renewed {
                at,
                result: Err(Failure::Failed),
                last_tick: 0,
                store: None,
            }
        ),
        Action::Seal { releasing: false }
    );
    h.step(&terms, Event::Sealed { last_tick: 0 });
    assert_eq!(
        h.step(&terms, Event::WrittenBack(Ok(()))),
        Action::Lost {
            why: Loss::Validity,
            unwritten: false
        }
    );
}

/// A store's clock as a renewal read it, 250 ms of lead, read to the ms.
fn reading(ms: u64, after_mono_us: u64) -> Option<StoreReading> {
    Some(StoreReading {
        ms,
        lead_ms: 250,
        slack_ms: 0,
        after_mono_us,
    })
}

/// A renewal that read the store's clock raises the clock's ceiling before anything else: to
/// the store's clock plus the lead less the margin, at the monotonic time after the renewal;
/// the action it leads to follows once the shell says the ceiling is set (any other event
/// asks for the ceiling again). At a later round a reading lower than the ceiling carried on
/// (etcd's `Date`, truncated) leaves the carried one; a failed renewal sets none.
#[test]
fn a_renewal_that_read_the_stores_clock_raises_the_clocks_ceiling_first() {
    let layout = layout();
    let terms = terms(&layout);
    let (mut h, _) = Holder::claim(&terms, recorded(NOW - 3), NOW);
    let at = Now {
        ms: NOW,
        mono_us: 0,
    };
    let renewed = Event::Renewed {
        at,
        result: Ok(Some(1_000_000)),
        last_tick: 0,
        store: reading(NOW - 40, 2_000),
    };
    let ceiling = Action::Ceiling {
        ms: NOW - 40 + 245,
        at_mono_us: 2_000,
        slack_ms: 0,
    };
    assert_eq!(h.step(&terms, renewed), ceiling);
    assert_eq!(h.ceiling(), Some((NOW + 205, 2_000, 0)));
    assert_eq!(h.step(&terms, Event::Round), ceiling);
    assert_eq!(
        h.step(&terms, Event::Done),
        Action::Extend {
            until_ms: NOW + 5_000
        }
    );
    assert!(matches!(
        h.step(&terms, Event::Extended(Ok(()))),
        Action::Build { .. }
    ));
    h.step(&terms, Event::Done);
    // A round 100 ms later whose reading is 300 ms low: the ceiling carried on wins (100 ms
    // later, 0.1 ms lower for the rate, truncated to the ms).
    assert_eq!(h.step(&terms, Event::Round), Action::Renew);
    let at = Now {
        ms: NOW + 100,
        mono_us: 100_000,
    };
    let low = Event::Renewed {
        at,
        result: Ok(Some(1_000_000)),
        last_tick: 0,
        store: reading(NOW - 200, 102_000),
    };
    assert_eq!(
        h.step(&terms, low),
        Action::Ceiling {
            ms: NOW + 205 + 99,
            at_mono_us: 102_000,
            slack_ms: 0
        }
    );
    assert!(matches!(h.step(&terms, Event::Done), Action::Fence { .. }));
    h.step(&terms, Event::Done);
    // A renewal that fails (unreachable) sets nothing.
    assert_eq!(h.step(&terms, Event::Round), Action::Renew);
    let failed = Event::Renewed {
        at: Now {
            ms: NOW + 200,
            mono_us: 200_000,
        },
        result: Err(Failure::Failed),
        last_tick: 0,
        store: None,
    };
    assert!(matches!(h.step(&terms, failed), Action::Fence { .. }));
    assert_eq!(h.ceiling(), Some((NOW + 304, 102_000, 0)));
}

/// A build that ends at its first renewal (a clock past the layout's end) asks for no
/// ceiling: it ends, and the shell lifts any ceiling at the end.
#[test]
fn a_build_that_ends_at_its_first_renewal_asks_for_no_ceiling() {
    let layout = layout();
    let terms = terms(&layout);
    let late = layout.expires_at_ms() + 1;
    let (mut h, _) = Holder::claim(&terms, recorded(late - 3), late);
    let renewed = Event::Renewed {
        at: Now {
            ms: late,
            mono_us: 0,
        },
        result: Ok(None),
        last_tick: 0,
        store: reading(late, 1_000),
    };
    assert_eq!(
        h.step(&terms, renewed),
        Action::End {
            let_go: LetGo::Abandon,
            outcome: Outcome::Exhausted
        }
    );
}

/// With ticks longer than a millisecond, a successor starts in the first tick that begins at
/// or after the record's end, never in the tick around it (which began before it: IDs the
/// holder before may have issued). Each offset of the record inside a 40 ms tick.
#[test]
fn a_successor_starts_in_the_first_tick_at_or_after_the_record() {
    let layout = Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .tick_ms(40)
        .build()
        .unwrap();
    let terms = terms(&layout);
    let start = layout.unix_ms_of_tick(layout.tick_at(NOW) + 1);
    for offset in 0..40 {
        let record = start + offset;
        let (mut h, _) = Holder::claim(&terms, recorded(record), start);
        let at = Now {
            ms: start,
            mono_us: 0,
        };
        let renewed = Event::Renewed {
            at,
            result: Ok(None),
            last_tick: 0,
            store: None,
        };
        assert!(matches!(h.step(&terms, renewed), Action::Extend { .. }));
        let Action::Build {
            resume_after: Some(resume_after),
            ..
        } = h.step(&terms, Event::Extended(Ok(())))
        else {
            panic!("offset {offset}: no build after a resume point");
        };
        let first_ms = layout.unix_ms_of_tick(resume_after + 1);
        let expected = if offset == 0 { start } else { start + 40 };
        assert_eq!(first_ms, expected, "offset {offset}: record {record}");
    }
}

/// A renewal sent at the very microsecond the lease's validity ends renews nothing, however
/// the store answers: the node may already be someone else's. The holder seals.
#[test]
fn a_renewal_sent_at_the_deadline_renews_nothing() {
    let layout = layout();
    let terms = terms(&layout);
    let mut h = holding(&terms, Some(300_000));
    h.step(&terms, Event::Round);
    let at = Now {
        ms: NOW + 300,
        mono_us: 300_000,
    };
    assert_eq!(
        h.step(
            &terms,
            Event::Renewed {
                at,
                result: Ok(Some(300_000)),
                last_tick: 0,
                store: None,
            }
        ),
        Action::Seal { releasing: false }
    );
}

/// A round that needs no extension publishes the fence's words exactly: the last tick before
/// the reservation, and the first tick past the one the deadline falls in (the bound of two
/// checks from this round's check, less a margin of 2 ms).
#[test]
fn a_round_publishes_the_fence_words_exactly() {
    let layout = layout();
    let terms = terms(&layout);
    let mut h = holding(&terms, None);
    h.step(&terms, Event::Round);
    let at = Now {
        ms: NOW + 100,
        mono_us: 100_000,
    };
    assert_eq!(
        h.step(
            &terms,
            Event::Renewed {
                at,
                result: Ok(None),
                last_tick: layout.tick_at(NOW + 100),
                store: None,
            }
        ),
        Action::Fence {
            limit: layout.tick_at(NOW + 5_000) - 1,
            deadline: layout.tick_at(NOW + 298) + 1,
        }
    );
}
