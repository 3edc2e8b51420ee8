//! `handover-check`: explores every interleaving of a few processes holding and handing over
//! one node through `monoflake::handover`, with the faults of the protocol's fault model
//! (docs/design.md, "The hand-over"), and fails at the first tick issued twice, printing the
//! shortest path to it.
//!
//! ```text
//! cargo run --release -p handover-check            # every flavour and configuration
//! cargo run --release -p handover-check -- --quick # a smaller search
//! ONLY=clocked cargo run --release -p handover-check # the searches whose name says "clocked"
//! ```
//!
//! Built with `RUSTFLAGS="--cfg monoflake_broken_give_back"` (the give-back of ace1576, which
//! wrote a record for a node that had none) it must find a duplicate: `.ci/run` checks both.
//! So must it with `--cfg monoflake_broken_db_floor` (a claimant of a store with a clock
//! takes no floor from it) and `--cfg monoflake_broken_db_lead` (the store confirms a holder
//! however far its clock leads), in the clocked store's search (`scripts/mutants.sh`).

mod model;

use std::collections::{HashMap, VecDeque};
use std::process::ExitCode;
use std::time::Instant;

use model::{Config, Flavour, Next, World};

/// What one search found.
struct Outcome {
    states: usize,
    transitions: usize,
    duplicate: Option<Vec<String>>,
}

/// Breadth first from the initial world: the first duplicate found is one of the fewest
/// steps.
fn explore(config: &Config) -> Outcome {
    let mut index: HashMap<World, u32> = HashMap::new();
    let mut parent: Vec<u32> = Vec::new();
    let mut queue: VecDeque<(World, u32)> = VecDeque::new();
    let first = World::initial(config);
    index.insert(first.clone(), 0);
    parent.push(0);
    queue.push_back((first, 0));
    let mut transitions = 0;
    let mut worlds: Vec<Option<World>> = Vec::new();
    while let Some((world, id)) = queue.pop_front() {
        for next in world.successors(config) {
            transitions += 1;
            match next {
                Next::World(w, _) => {
                    if !index.contains_key(&w) {
                        let n = u32::try_from(parent.len()).expect("fewer than 2^32 states");
                        index.insert(w.clone(), n);
                        parent.push(id);
                        queue.push_back((w, n));
                        if parent.len().is_multiple_of(2_000_000) {
                            eprintln!("  … {} states", parent.len());
                        }
                    }
                }
                Next::Duplicate(what) => {
                    // Rebuild the path: the worlds by number, then each step's label.
                    worlds.resize(parent.len(), None);
                    for (w, &n) in &index {
                        worlds[n as usize] = Some(w.clone());
                    }
                    let mut path = vec![id];
                    while let Some(&last) = path.last()
                        && last != 0
                    {
                        path.push(parent[last as usize]);
                    }
                    path.reverse();
                    let mut steps = Vec::new();
                    for pair in path.windows(2) {
                        let (from, to) = (&worlds[pair[0] as usize], &worlds[pair[1] as usize]);
                        let (Some(from), Some(to)) = (from, to) else {
                            continue;
                        };
                        let label = from
                            .successors(config)
                            .into_iter()
                            .find_map(|n| match n {
                                Next::World(w, label) if &w == to => Some(label),
                                _ => None,
                            })
                            .unwrap_or_default();
                        steps.push(format!("t={:>2}  {label}", from.t));
                    }
                    steps.push(format!("t={:>2}  {what}", world.t));
                    return Outcome {
                        states: index.len(),
                        transitions,
                        duplicate: Some(steps),
                    };
                }
            }
        }
    }
    Outcome {
        states: index.len(),
        transitions,
        duplicate: None,
    }
}

/// The searches: each fault combination that has produced duplicates before, on each store
/// flavour. One search with every fault at once grows past what CI can explore at a useful
/// horizon; these keep the clock step (the holder ahead) in every one.
fn configs(horizon: u8) -> Vec<(String, Config)> {
    let none = Config {
        flavour: Flavour::File,
        procs: std::env::var("PROCS")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(3),
        passer: true,
        horizon,
        deletions: 0,
        delete_under_running_holder: false,
        steps: 1,
        step_size: 7,
        pauses: 0,
        crashes: 0,
        failed_writes: 0,
    };
    let file = Config {
        flavour: Flavour::File,
        ..none
    };
    let remote = Config {
        flavour: Flavour::Remote,
        ..none
    };
    let clocked = Config {
        flavour: Flavour::Clocked,
        ..none
    };
    vec![
        (
            "file store, records deleted".into(),
            Config {
                deletions: 1,
                ..file
            },
        ),
        (
            "file store, records deleted, the holder stopped".into(),
            Config {
                deletions: 1,
                pauses: 1,
                ..file
            },
        ),
        (
            "file store, records deleted, a write-back failing".into(),
            Config {
                deletions: 1,
                failed_writes: 1,
                ..file
            },
        ),
        (
            "file store, records deleted, kill -9".into(),
            Config {
                deletions: 1,
                crashes: 1,
                ..file
            },
        ),
        (
            "remote store, records deleted under a running holder".into(),
            Config {
                deletions: 1,
                delete_under_running_holder: true,
                ..remote
            },
        ),
        (
            "remote store, the holder stopped, killed, its write-back failing".into(),
            Config {
                pauses: 1,
                crashes: 1,
                failed_writes: 1,
                ..remote
            },
        ),
        (
            "remote store, records deleted, the holder stopped, clocks within the margin".into(),
            Config {
                deletions: 1,
                pauses: 1,
                step_size: 1,
                ..remote
            },
        ),
        // Two successors in turn: a stale write-back after a second deletion (evidence, not
        // a record) must not let the second start at once under the first.
        (
            "remote store, two successors, records deleted, the holder stopped, clocks within the margin".into(),
            Config { deletions: 1, pauses: 1, step_size: 1, passer: false, ..remote },
        ),
        // Issue 34, case 4, on a store with a clock of its own (PostgreSQL): every record of
        // the node deleted while its holder is stopped, the holder's clock ahead of its
        // successor's by more than the margin. The store did not confirm a holder further
        // ahead of its clock than the lead allowed, and the successor starts above the
        // store's clock at its claim plus that lead and the confirm bound: no duplicate.
        // Two processes, the holder and its successor: what a third adds (a search passing
        // the node over) the other searches cover, and this keeps the run's time.
        (
            "clocked store (PostgreSQL, etcd), records deleted, the holder stopped, clocks apart".into(),
            Config {
                deletions: 1,
                pauses: 1,
                procs: 2,
                ..clocked
            },
        ),
        // Clocks apart by less, either way: the holder ahead (its checks not confirmed), or
        // the successor behind by more than the margin (its wall clock stepped back) while the
        // holder, stopped after issuing, writes back too late. The successor's own clock
        // would start it below the holder's last ticks; the store's clock at its claim does
        // not. (This search also catches both broken variants, `monoflake_broken_db_floor`
        // and `monoflake_broken_db_lead`, at `--quick`.)
        (
            "clocked store (PostgreSQL, etcd), records deleted, the holder stopped, clocks apart by 3 either way".into(),
            Config {
                deletions: 1,
                pauses: 1,
                step_size: 3,
                procs: 2,
                ..clocked
            },
        ),
        // A remote store without a clock of its own — as etcd was until its clock (the `Date`
        // of its HTTP gateway) was read — every record of the node deleted while its holder
        // is stopped, and the holder's clock ahead of its successor's by more than the
        // margin. Nothing that survives says what the holder issued. The search must find
        // the duplicate: it shows the model is able to find one here, and why every remote
        // store now takes a common clock (the clocked searches above).
        (
            OUTSIDE.to_owned() + "remote store without a clock, records deleted, the holder stopped, clocks apart",
            Config {
                deletions: 1,
                pauses: 1,
                ..remote
            },
        ),
    ]
}

/// Marks a search whose duplicate is expected: a protocol no store runs any more, kept to show why.
const OUTSIDE: &str = "a duplicate expected: ";

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick");
    let horizon = std::env::var("HORIZON")
        .ok()
        .and_then(|h| h.parse().ok())
        .unwrap_or(if quick { 9 } else { 10 });
    let mut total = 0;
    let started = Instant::now();
    let mut failed = false;
    // ONLY=TEXT: just the searches whose name contains TEXT.
    let only = std::env::var("ONLY").unwrap_or_default();
    for (name, config) in configs(horizon) {
        if !name.contains(&only) {
            continue;
        }
        let t = Instant::now();
        let outcome = explore(&config);
        total += outcome.states;
        println!(
            "{name}: {} processes, horizon {}, faults {{deletions {}, clock steps {} of ±{}, \
             pauses {}, kills {}, failed write-backs {}}}: {} states, {} transitions, {:.1} s",
            config.procs,
            config.horizon,
            config.deletions,
            config.steps,
            config.step_size,
            config.pauses,
            config.crashes,
            config.failed_writes,
            outcome.states,
            outcome.transitions,
            t.elapsed().as_secs_f64()
        );
        std::io::Write::flush(&mut std::io::stdout()).ok();
        let outside = name.starts_with(OUTSIDE);
        match (outcome.duplicate, outside) {
            (Some(steps), false) => {
                failed = true;
                println!("  DUPLICATE, in {} steps:", steps.len());
                for step in steps {
                    println!("    {step}");
                }
            }
            (Some(steps), true) => {
                println!("  a duplicate, as expected there, in {} steps", steps.len());
            }
            (None, true) => {
                failed = true;
                println!("  no duplicate found where one is expected: the model has gone blind");
            }
            (None, false) => {}
        }
    }
    println!(
        "handover-check: {total} states explored in {:.1} s: {}",
        started.elapsed().as_secs_f64(),
        if failed {
            "a tick issued twice"
        } else {
            "no tick issued twice"
        }
    );
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
