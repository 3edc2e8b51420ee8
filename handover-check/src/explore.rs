//! Breadth first over every world reachable from the initial one: the first violation found
//! is one of the fewest steps. Worlds seen are kept as 128-bit fingerprints with the step
//! that reached them; a violation's path is rebuilt by replaying those steps from the start.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};

use crate::world::{Config, Next, World};

/// What a violation was.
pub enum Found {
    /// A time-field value issued by two processes.
    Duplicate,
    /// A liveness failure in a fault-free search.
    Stuck,
}

/// What one search found.
pub struct Outcome {
    pub states: usize,
    pub transitions: u64,
    /// The violation and the steps to it.
    pub found: Option<(Found, Vec<String>)>,
}

fn fingerprint(world: &World) -> u128 {
    let mut a = DefaultHasher::new();
    world.hash(&mut a);
    let mut b = DefaultHasher::new();
    0x9e37_79b9_7f4a_7c15_u64.hash(&mut b);
    world.hash(&mut b);
    (u128::from(a.finish()) << 64) | u128::from(b.finish())
}

/// Explores `config`'s worlds, breadth first.
pub fn explore(config: &Config) -> Outcome {
    let first = World::initial(config);
    let mut seen: HashMap<u128, u32> = HashMap::new();
    // Per world: the world it was reached from and which of that world's successors it is.
    let mut steps: Vec<(u32, u32)> = vec![(0, 0)];
    seen.insert(fingerprint(&first), 0);
    let mut queue = VecDeque::from([(first, 0_u32)]);
    let mut transitions = 0_u64;
    while let Some((world, id)) = queue.pop_front() {
        for (choice, next) in world.successors(config).into_iter().enumerate() {
            transitions += 1;
            let (found, what) = match next {
                Next::World(w, _) => {
                    let fp = fingerprint(&w);
                    if let std::collections::hash_map::Entry::Vacant(e) = seen.entry(fp) {
                        let n = u32::try_from(steps.len()).expect("fewer than 2^32 worlds");
                        e.insert(n);
                        steps.push((id, choice as u32));
                        queue.push_back((w, n));
                        if steps.len().is_multiple_of(2_000_000) {
                            eprintln!("  … {} worlds", steps.len());
                        }
                    }
                    continue;
                }
                Next::Duplicate(what) => (Found::Duplicate, what),
                Next::Stuck(what) => (Found::Stuck, what),
            };
            let mut path = replay(config, &steps, id);
            path.push(format!("t={:>2}  {what}", world.t));
            return Outcome {
                states: seen.len(),
                transitions,
                found: Some((found, path)),
            };
        }
    }
    Outcome {
        states: seen.len(),
        transitions,
        found: None,
    }
}

/// The labelled steps from the initial world to world `id`.
fn replay(config: &Config, steps: &[(u32, u32)], id: u32) -> Vec<String> {
    let mut choices = Vec::new();
    let mut at = id;
    while at != 0 {
        let (parent, choice) = steps[at as usize];
        choices.push(choice);
        at = parent;
    }
    choices.reverse();
    let mut world = World::initial(config);
    let mut path = Vec::new();
    for choice in choices {
        let t = world.t;
        match world.successors(config).into_iter().nth(choice as usize) {
            Some(Next::World(next, label)) => {
                path.push(format!("t={t:>2}  {label}"));
                world = next;
            }
            _ => {
                path.push("(the replay diverged)".into());
                break;
            }
        }
    }
    path
}
