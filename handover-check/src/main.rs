//! `handover-check`: explores every interleaving of a few processes holding and handing over
//! one node, each running the library's own holder (`monoflake::handover::Holder`, the type
//! `build.rs` and `keeper.rs` run) against a model of a real store that keeps its merge rules
//! (`store.rs`), with the faults of the protocol's fault model (docs/design.md, "The
//! hand-over"). It fails at the first time-field value issued twice, printing the shortest
//! path to it, and — in its fault-free searches — at the first honest claimant that does not
//! start within the tolerance.
//!
//! ```text
//! cargo run --release -p handover-check            # every search
//! cargo run --release -p handover-check -- --quick # shorter horizons
//! ONLY=file cargo run --release -p handover-check  # the searches whose name says "file"
//! ```
//!
//! Exit status: 0 when every search is clean (no duplicate, liveness holds, and each search
//! that must find a duplicate — a fault outside the model — finds one); **3** when a search
//! finds a time-field value issued twice (a line starting `DUPLICATE`); **4** when the check
//! went blind — a search that must find a duplicate found none, an honest claimant did not
//! start, or a holder whose clock honours its ceiling was refused by the store's clock (a line
//! starting `BLIND`); 2 for a bad argument. A duplicate wins over blindness.

mod explore;
mod store;
mod world;

use std::process::ExitCode;
use std::time::Instant;

use monoflake::Layout;

use explore::{Found, explore};
use store::Flavour;
use world::{Budget, Config, Role};

/// The epoch of the searches' layouts, Unix ms.
const EPOCH_MS: u64 = 1_600_000_000_000;

/// A layout of the searches' one bit shape: `tick_ms` ticks, the epoch `epoch_delta_ms` after
/// [`EPOCH_MS`].
fn layout(tick_ms: u64, epoch_delta_ms: u64) -> Layout {
    Layout::builder()
        .node_field("worker", 4)
        .epoch_ms(EPOCH_MS + epoch_delta_ms)
        .tick_ms(tick_ms)
        .build()
        .expect("a valid layout")
}

/// A process: user `uid`, state directory `dir`, the search's layout `layout`.
const fn role(uid: u8, dir: u8, layout: usize) -> Role {
    Role {
        uid,
        dir,
        layout,
        passer: false,
        trust: false,
        skew_ms: 0,
        step_ms: 0,
        ns: 0,
        capped: false,
    }
}

/// How a search must end.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// No duplicate (and, with liveness, every honest claimant starts).
    Clean,
    /// A duplicate: a fault outside the model, kept to show the checker can see one.
    Duplicate,
}

/// The searches: the fault combinations that have produced duplicates before, on each store,
/// on a 1 ms and a coarse tick, and the fault-free ones that check liveness.
fn searches(horizon: u8) -> Vec<(&'static str, Expect, Config)> {
    let ms1 = layout(1, 0);
    let coarse = layout(40, 7);
    let later = layout(1, 1_000);
    // The holder, a little fast; its successor of the same user, a little slow.
    let holder = Role {
        skew_ms: 20,
        step_ms: 350,
        ..role(0, 0, 0)
    };
    let successor = Role {
        skew_ms: -20,
        step_ms: -350,
        ..role(0, 0, 0)
    };
    let passer = Role {
        passer: true,
        ..role(1, 0, 0)
    };
    let base = Config {
        flavour: Flavour::File,
        layouts: vec![ms1.clone()],
        roles: vec![holder, successor, passer],
        horizon,
        budget: Budget {
            steps: 1,
            ..Budget::default()
        },
        delete_under_running_holder: false,
        stops: false,
        liveness: false,
        keeps_claim: false,
    };
    let with = |budget: Budget| Config {
        budget: Budget { steps: 1, ..budget },
        ..base.clone()
    };
    let two = |config: Config| Config {
        roles: config.roles[..2].to_vec(),
        ..config
    };
    let on = |flavour: Flavour, config: Config| Config { flavour, ..config };
    let coarse_tick = |config: Config| Config {
        layouts: vec![coarse.clone()],
        ..config
    };
    // A holder whose wall clock steps forward past the store's lead and whose clock honours
    // the ceiling, and an honest successor whose clock does too.
    let ahead_capped = |config: Config| Config {
        roles: vec![
            Role {
                capped: true,
                ..holder
            },
            Role {
                capped: true,
                step_ms: 0,
                ..successor
            },
        ],
        ..config
    };
    let deleted = Budget {
        deletions: 1,
        ..Budget::default()
    };
    let failing_writes = Budget {
        failed_extends: 2,
        crashes: 1,
        steps: 0,
        ..Budget::default()
    };
    vec![
        ("file: records deleted", Expect::Clean, with(deleted)),
        (
            "file: records deleted, the holder stopped",
            Expect::Clean,
            with(Budget {
                pauses: 1,
                ..deleted
            }),
        ),
        (
            "file: records deleted, a write-back failing",
            Expect::Clean,
            with(Budget {
                failed_writebacks: 1,
                ..deleted
            }),
        ),
        (
            "file: records deleted, kill -9",
            Expect::Clean,
            with(Budget {
                crashes: 1,
                ..deleted
            }),
        ),
        // The fence's boundary: reservation writes fail, the clock reaches the reservation,
        // the holder is killed, a successor starts at the reservation.
        (
            "file: reservation writes failing, kill -9",
            Expect::Clean,
            two(Config {
                budget: failing_writes,
                ..base.clone()
            }),
        ),
        (
            "file, 40 ms ticks: reservation writes failing, kill -9",
            Expect::Clean,
            coarse_tick(two(Config {
                budget: failing_writes,
                ..base.clone()
            })),
        ),
        // Issue 54, case 1: a lost holder let go after a successor of its user took the node
        // in its directory; the successor killed; a claimant of another user's directory,
        // its clock set back, reads only the host's anchors.
        (
            "file: a lost holder dropped after its successor, two directories",
            Expect::Clean,
            Config {
                roles: vec![
                    Role {
                        step_ms: 0,
                        ..holder
                    },
                    Role {
                        step_ms: 0,
                        ..successor
                    },
                    Role {
                        step_ms: -350,
                        ..role(1, 1, 0)
                    },
                ],
                budget: Budget {
                    deletions: 1,
                    crashes: 1,
                    steps: 1,
                    ..Budget::default()
                },
                stops: true,
                delete_under_running_holder: true,
                ..base.clone()
            },
        ),
        // Two services sharing a state directory, each in a network namespace and a
        // `/var/tmp` of its own (systemd's PrivateNetwork= and PrivateTmp=): no host-wide
        // claim and no anchor reach across, and the file store says so (`Caveat`). The lock
        // file still excludes them; what keeps a successor above a holder whose records were
        // deleted is the holder's write-back, read after the unrecorded wait.
        (
            "file: two services' namespaces, one state directory, records deleted",
            Expect::Clean,
            two(Config {
                roles: vec![holder, Role { ns: 1, ..successor }],
                budget: Budget {
                    deletions: 1,
                    steps: 1,
                    ..Budget::default()
                },
                delete_under_running_holder: true,
                ..base.clone()
            }),
        ),
        // Two state directories used in turn, the clock set back between: the host's anchors.
        (
            "file: two directories in turn, the clock set back",
            Expect::Clean,
            two(Config {
                roles: vec![
                    holder,
                    Role {
                        dir: 1,
                        ..successor
                    },
                ],
                stops: true,
                budget: Budget {
                    steps: 1,
                    crashes: 1,
                    ..Budget::default()
                },
                ..base.clone()
            }),
        ),
        // A claimant that trusts reservations ahead: its clock jumps to them.
        (
            "file: a trusting successor, its clock set back past the tolerance",
            Expect::Clean,
            two(Config {
                roles: vec![
                    holder,
                    Role {
                        trust: true,
                        step_ms: -700,
                        ..successor
                    },
                ],
                budget: Budget {
                    steps: 1,
                    crashes: 1,
                    ..Budget::default()
                },
                ..base.clone()
            }),
        ),
        // Two layouts of one bit shape, epochs a second apart: records are ID values.
        (
            "file: two layouts of one shape, epochs 1 s apart",
            Expect::Clean,
            two(Config {
                layouts: vec![ms1.clone(), later.clone()],
                roles: vec![
                    holder,
                    Role {
                        layout: 1,
                        ..successor
                    },
                ],
                stops: true,
                budget: Budget {
                    steps: 1,
                    crashes: 1,
                    ..Budget::default()
                },
                ..base.clone()
            }),
        ),
        (
            "etcd: records deleted under a running holder",
            Expect::Clean,
            on(
                Flavour::Etcd,
                Config {
                    delete_under_running_holder: true,
                    ..with(deleted)
                },
            ),
        ),
        (
            "etcd: the holder stopped, killed, its write-back failing",
            Expect::Clean,
            on(
                Flavour::Etcd,
                with(Budget {
                    pauses: 1,
                    crashes: 1,
                    failed_writebacks: 1,
                    ..Budget::default()
                }),
            ),
        ),
        (
            "etcd: reservation writes failing, kill -9",
            Expect::Clean,
            on(
                Flavour::Etcd,
                two(Config {
                    budget: failing_writes,
                    ..base.clone()
                }),
            ),
        ),
        // A clock stepped forward while the store cannot be reached, then the records
        // deleted: the fence's deadline stays at the last confirmed check plus the bound.
        (
            "file: renewals failing, the holder's clock stepped, records deleted",
            Expect::Clean,
            two(with(Budget {
                failed_renewals: 2,
                ..deleted
            })),
        ),
        (
            "pg: renewals failing, the holder's clock stepped, records deleted",
            Expect::Clean,
            on(
                Flavour::Pg,
                two(with(Budget {
                    failed_renewals: 2,
                    ..deleted
                })),
            ),
        ),
        // The same with a step smaller than a unit: the holder's clock then reads just short
        // of its deadline, where the margins of the floors are what keeps them apart.
        (
            "pg: renewals failing, the holder's clock stepped 40 ms, records deleted",
            Expect::Clean,
            on(
                Flavour::Pg,
                two(Config {
                    roles: vec![
                        Role {
                            step_ms: 40,
                            ..holder
                        },
                        successor,
                    ],
                    ..with(Budget {
                        failed_renewals: 2,
                        ..deleted
                    })
                }),
            ),
        ),
        (
            "etcd, 40 ms ticks: renewals failing, the holder's clock stepped 40 ms, records deleted",
            Expect::Clean,
            coarse_tick(on(
                Flavour::Etcd,
                two(Config {
                    roles: vec![
                        Role {
                            step_ms: 40,
                            ..holder
                        },
                        successor,
                    ],
                    ..with(Budget {
                        failed_renewals: 2,
                        ..deleted
                    })
                }),
            )),
        ),
        // A search for any node passing the node over while its holder's records are gone:
        // what it gives back must not read as a record to the next claimant, whose start
        // would then skip the wait, the re-read and the store's floor.
        (
            "pg: a search passes the node over, its clock set back, records deleted",
            Expect::Clean,
            on(
                Flavour::Pg,
                Config {
                    roles: vec![
                        Role {
                            step_ms: 0,
                            ..holder
                        },
                        Role {
                            step_ms: 0,
                            ..successor
                        },
                        Role {
                            step_ms: -350,
                            ..passer
                        },
                    ],
                    ..with(deleted)
                },
            ),
        ),
        (
            "etcd: a search passes the node over, its clock set back, records deleted",
            Expect::Clean,
            on(
                Flavour::Etcd,
                Config {
                    roles: vec![
                        Role {
                            step_ms: 0,
                            ..holder
                        },
                        Role {
                            step_ms: 0,
                            ..successor
                        },
                        Role {
                            step_ms: -350,
                            ..passer
                        },
                    ],
                    ..with(deleted)
                },
            ),
        ),
        // Two successors in turn: a lost holder's write-back, late (it was stopped), lands
        // after the second deletion; it is evidence of that holder only, and must not let the
        // second successor start at once under the first.
        (
            "pg: two successors, a late write-back after a second deletion",
            Expect::Clean,
            on(
                Flavour::Pg,
                Config {
                    roles: vec![
                        Role {
                            step_ms: 0,
                            ..holder
                        },
                        Role {
                            step_ms: 0,
                            ..successor
                        },
                        Role {
                            step_ms: 0,
                            ..role(1, 0, 0)
                        },
                    ],
                    budget: Budget {
                        deletions: 2,
                        pauses: 1,
                        ..Budget::default()
                    },
                    ..base.clone()
                },
            ),
        ),
        // Issue 34, case 4: every record deleted while its holder is stopped, its clock ahead.
        (
            "pg: records deleted, the holder stopped, clocks apart",
            Expect::Clean,
            on(
                Flavour::Pg,
                two(with(Budget {
                    pauses: 1,
                    ..deleted
                })),
            ),
        ),
        (
            "pg, 40 ms ticks: records deleted, the holder stopped, clocks apart",
            Expect::Clean,
            coarse_tick(on(
                Flavour::Pg,
                two(with(Budget {
                    pauses: 1,
                    ..deleted
                })),
            )),
        ),
        (
            "pg: reservation writes failing, kill -9",
            Expect::Clean,
            on(
                Flavour::Pg,
                two(Config {
                    budget: failing_writes,
                    ..base.clone()
                }),
            ),
        ),
        // Liveness: no faults; the holder may let go; an honest claimant starts within the
        // tolerance (a node released moments ago at once).
        (
            "file, fault-free: liveness",
            Expect::Clean,
            Config {
                budget: Budget::default(),
                stops: true,
                liveness: true,
                ..base.clone()
            },
        ),
        // A holder killed leaves its reservation, up to a window ahead: its successor waits
        // it out, within the tolerance.
        (
            "pg, a holder killed: liveness",
            Expect::Clean,
            on(
                Flavour::Pg,
                two(Config {
                    budget: Budget {
                        crashes: 1,
                        ..Budget::default()
                    },
                    liveness: true,
                    ..base.clone()
                }),
            ),
        ),
        (
            "file, a holder killed: liveness",
            Expect::Clean,
            two(Config {
                budget: Budget {
                    crashes: 1,
                    ..Budget::default()
                },
                liveness: true,
                ..base.clone()
            }),
        ),
        (
            "etcd, fault-free: liveness",
            Expect::Clean,
            on(
                Flavour::Etcd,
                Config {
                    budget: Budget::default(),
                    stops: true,
                    liveness: true,
                    ..base.clone()
                },
            ),
        ),
        (
            "pg, 40 ms ticks, fault-free: liveness",
            Expect::Clean,
            coarse_tick(on(
                Flavour::Pg,
                Config {
                    budget: Budget::default(),
                    stops: true,
                    liveness: true,
                    ..base.clone()
                },
            )),
        ),
        // Issue 60: a holder's wall clock stepped forward past the store's lead (350 ms, the
        // lead 50 ms), its locked clock under the ceiling its renewals set: it is never refused
        // by the store's clock (`keeps_claim`), and its successor, once it lets go, starts
        // within the tolerance.
        (
            "pg, a capped clock: the holder's wall clock stepped past the lead: it keeps its claim",
            Expect::Clean,
            on(
                Flavour::Pg,
                ahead_capped(Config {
                    stops: true,
                    liveness: true,
                    keeps_claim: true,
                    ..base.clone()
                }),
            ),
        ),
        (
            "etcd, a capped clock: the holder's wall clock stepped past the lead: it keeps its claim",
            Expect::Clean,
            on(
                Flavour::Etcd,
                ahead_capped(Config {
                    stops: true,
                    liveness: true,
                    keeps_claim: true,
                    ..base.clone()
                }),
            ),
        ),
        // The same clocks under faults: a capped holder whose renewals fail (its ceiling
        // carried on, never refreshed) or which is stopped, its records deleted.
        (
            "pg, capped clocks: renewals failing, the holder's wall clock stepped, records deleted",
            Expect::Clean,
            on(
                Flavour::Pg,
                ahead_capped(with(Budget {
                    failed_renewals: 2,
                    ..deleted
                })),
            ),
        ),
        (
            "etcd, capped clocks: records deleted, the holder stopped, its wall clock stepped",
            Expect::Clean,
            on(
                Flavour::Etcd,
                ahead_capped(with(Budget {
                    pauses: 1,
                    ..deleted
                })),
            ),
        ),
        // Outside the fault model: every trace of the node on the host deleted (the state
        // directories and the anchors) after its holder died, the clock set back. Nothing is
        // left to read; the search must find the duplicate, or the checker has gone blind.
        (
            "outside: every trace on the host deleted after a kill, the clock set back",
            Expect::Duplicate,
            two(Config {
                budget: Budget {
                    erasures: 1,
                    crashes: 1,
                    steps: 1,
                    ..Budget::default()
                },
                ..base.clone()
            }),
        ),
    ]
}

fn main() -> ExitCode {
    let mut quick = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--quick" => quick = true,
            "--help" | "-h" => {
                println!("usage: handover-check [--quick]   (env: ONLY=<text>, HORIZON=<units>)");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("handover-check: unknown argument {other:?} (try --help)");
                return ExitCode::from(2);
            }
        }
    }
    let horizon = match std::env::var("HORIZON") {
        Ok(h) => match h.parse() {
            Ok(h) => h,
            Err(_) => {
                eprintln!("handover-check: HORIZON={h:?} is not a number of units (0..=255)");
                return ExitCode::from(2);
            }
        },
        Err(_) if quick => 12,
        Err(_) => 14,
    };
    let only = std::env::var("ONLY").unwrap_or_default();
    let started = Instant::now();
    let (mut total, mut duplicate, mut blind) = (0, false, false);
    for (name, expect, config) in searches(horizon) {
        if !name.contains(&only) {
            continue;
        }
        let t = Instant::now();
        let outcome = explore(&config);
        total += outcome.states;
        println!(
            "{name}: {} processes, horizon {} ({} ms), faults {:?}: {} worlds, {} transitions, \
             {:.1} s",
            config.roles.len(),
            config.horizon,
            u64::from(config.horizon) * world::UNIT_MS,
            config.budget,
            outcome.states,
            outcome.transitions,
            t.elapsed().as_secs_f64()
        );
        let print = |steps: &[String]| {
            for step in steps {
                println!("    {step}");
            }
        };
        match (outcome.found, expect) {
            (Some((Found::Duplicate, steps)), Expect::Clean) => {
                duplicate = true;
                println!("  DUPLICATE, in {} steps:", steps.len());
                print(&steps);
            }
            (Some((Found::Duplicate, steps)), Expect::Duplicate) => {
                println!("  a duplicate, as expected there, in {} steps", steps.len());
            }
            (Some((Found::Stuck, steps)), _) => {
                blind = true;
                println!(
                    "  BLIND: liveness (an honest claimant did not start, or a capped holder was refused), in {} steps:",
                    steps.len()
                );
                print(&steps);
            }
            (None, Expect::Duplicate) => {
                blind = true;
                println!("  BLIND: no duplicate found where one is expected");
            }
            (None, Expect::Clean) => {}
        }
        std::io::Write::flush(&mut std::io::stdout()).ok();
    }
    let verdict = if duplicate {
        "a time-field value issued twice"
    } else if blind {
        "the check went blind"
    } else {
        "no tick issued twice"
    };
    println!(
        "handover-check: {total} worlds explored in {:.1} s: {verdict}",
        started.elapsed().as_secs_f64()
    );
    if duplicate {
        ExitCode::from(3)
    } else if blind {
        ExitCode::from(4)
    } else {
        ExitCode::SUCCESS
    }
}
