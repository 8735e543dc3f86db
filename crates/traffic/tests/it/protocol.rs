//! The counting protocol, checked over every interleaving (an exhaustive model test:
//! `loom` is not in the lockfile). Each model is the protocol of `counters.rs` cut into
//! its atomic steps; a depth-first search runs every order of the actors' steps and
//! checks the invariants of docs/traffic.md after each. Each model also has a mutant
//! (a protocol with one rule broken) that the same search must catch, so the checker is
//! shown able to fail.

use std::collections::HashSet;

/// Runs every interleaving of `state`'s actors; `check` after every step and at the end.
fn explore<S: Clone + Model>(state: &S, visited: &mut u64) -> Result<(), String> {
    let mut moved = false;
    for actor in 0..S::ACTORS {
        let mut next = state.clone();
        if next.step(actor) {
            moved = true;
            *visited += 1;
            next.check()?;
            explore(&next, visited)?;
        }
    }
    if !moved {
        state.check_final()?;
    }
    Ok(())
}

trait Model {
    const ACTORS: usize;
    /// Runs one step of `actor`; false when it has finished or is blocked.
    fn step(&mut self, actor: usize) -> bool;
    fn check(&self) -> Result<(), String>;
    fn check_final(&self) -> Result<(), String>;
}

// ---- counting: slots, claims, death, the reader ----

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Claim,
    Load,
    Store,
    Die,
}

#[derive(Clone)]
struct Worker {
    program: &'static [Op],
    pc: usize,
    slot: Option<usize>,
    loaded: u64,
    answered: u64,
}

#[derive(Clone)]
struct Counting {
    /// One slot's counter (the model's MAX_SLOTS is 1) and its lock.
    slot: u64,
    holder: Option<usize>,
    unslotted: u64,
    workers: [Worker; 2],
    /// The reader: its pc, the sum it is building, the answers at its start, its last total.
    reader_pc: usize,
    partial: u64,
    floor: u64,
    last_total: u64,
    /// Mutants: a claim zeroes the slot; a claim ignores the lock.
    zero_on_claim: bool,
    ignore_lock: bool,
}

const READS: usize = 2;

impl Counting {
    fn new(a: &'static [Op], b: &'static [Op]) -> Counting {
        let worker = |program| Worker {
            program,
            pc: 0,
            slot: None,
            loaded: 0,
            answered: 0,
        };
        Counting {
            slot: 0,
            holder: None,
            unslotted: 0,
            workers: [worker(a), worker(b)],
            reader_pc: 0,
            partial: 0,
            floor: 0,
            last_total: 0,
            zero_on_claim: false,
            ignore_lock: false,
        }
    }

    fn answered(&self) -> u64 {
        self.workers.iter().map(|w| w.answered).sum()
    }
}

impl Model for Counting {
    const ACTORS: usize = 3;

    fn step(&mut self, actor: usize) -> bool {
        if actor == 2 {
            // Reader: start (note the answers so far), read the slot, read unslotted + check.
            if self.reader_pc >= 3 * READS {
                return false;
            }
            match self.reader_pc % 3 {
                0 => {
                    self.floor = self.answered();
                    self.partial = 0;
                }
                1 => self.partial += self.slot,
                _ => {
                    self.partial += self.unslotted;
                }
            }
            self.reader_pc += 1;
            return true;
        }
        let zero = self.zero_on_claim;
        let ignore = self.ignore_lock;
        let Some(&op) = self.workers[actor].program.get(self.workers[actor].pc) else {
            return false;
        };
        match op {
            Op::Claim => {
                if self.holder.is_none() || ignore {
                    self.holder = Some(actor);
                    self.workers[actor].slot = Some(0);
                    if zero {
                        self.slot = 0;
                    }
                }
            }
            Op::Load => match self.workers[actor].slot {
                Some(_) => self.workers[actor].loaded = self.slot,
                // No slot: one atomic add to the unslotted counter (its Store is empty).
                None => {
                    self.unslotted += 1;
                    self.workers[actor].answered += 1;
                }
            },
            Op::Store => {
                if self.workers[actor].slot.is_some() {
                    self.slot = self.workers[actor].loaded + 1;
                    self.workers[actor].answered += 1;
                }
            }
            Op::Die => {
                if self.holder == Some(actor) {
                    self.holder = None;
                }
                self.workers[actor].slot = None;
            }
        }
        self.workers[actor].pc += 1;
        true
    }

    fn check(&self) -> Result<(), String> {
        if self.reader_pc.is_multiple_of(3) && self.reader_pc > 0 {
            let total = self.partial;
            if total < self.last_total {
                return Err(format!("total went down: {} then {total}", self.last_total));
            }
            if total < self.floor || total > self.answered() {
                return Err(format!(
                    "total {total} outside [{}, {}]",
                    self.floor,
                    self.answered()
                ));
            }
        }
        Ok(())
    }

    fn check_final(&self) -> Result<(), String> {
        let counted = self.slot + self.unslotted;
        if counted != self.answered() {
            return Err(format!("{} answers, {counted} counted", self.answered()));
        }
        Ok(())
    }
}

/// The reader keeps its last total across reads; `check` sees it through this wrapper.
#[derive(Clone)]
struct Tracked(Counting);

impl Model for Tracked {
    const ACTORS: usize = 3;
    fn step(&mut self, actor: usize) -> bool {
        let before = self.0.reader_pc;
        let moved = self.0.step(actor);
        if moved && actor == 2 && self.0.reader_pc.is_multiple_of(3) && before % 3 == 2 {
            // A read just ended: check it against the last one, then remember it.
            if let Err(error) = self.0.check() {
                panic!("{error}");
            }
            self.0.last_total = self.0.partial;
        }
        moved
    }
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
    fn check_final(&self) -> Result<(), String> {
        self.0.check_final()
    }
}

const DIES: &[Op] = &[Op::Claim, Op::Load, Op::Store, Op::Load, Op::Store, Op::Die];
const LATE: &[Op] = &[Op::Claim, Op::Load, Op::Store, Op::Load, Op::Store];

fn run(model: Counting) -> Result<u64, String> {
    let mut visited = 0;
    std::panic::catch_unwind(|| {
        let mut visited = 0;
        explore(&Tracked(model), &mut visited).map(|()| visited)
    })
    .map_err(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_else(|| "panic".into())
    })?
    .inspect(|v| visited = *v)
}

#[test]
fn slot_reused_after_death_counts_exactly_in_every_interleaving() {
    let visited = run(Counting::new(DIES, LATE)).expect("the protocol holds");
    assert!(visited > 10_000, "explored {visited} steps");
}

#[test]
fn mutant_zeroing_a_reused_slot_is_caught() {
    let mut model = Counting::new(DIES, LATE);
    model.zero_on_claim = true;
    let error = run(model).expect_err("zeroing on claim loses counts");
    assert!(
        error.contains("went down") || error.contains("counted") || error.contains("outside"),
        "{error}"
    );
}

#[test]
fn mutant_two_writers_on_one_slot_is_caught() {
    let mut model = Counting::new(DIES, LATE);
    model.ignore_lock = true;
    let error = run(model).expect_err("two writers lose counts");
    assert!(
        error.contains("counted") || error.contains("outside"),
        "{error}"
    );
}

// ---- registry: two workers add the same label set, one may die part way ----

#[derive(Clone, Copy, PartialEq, Debug)]
enum Reg {
    Find,
    Lock,
    FindLocked,
    WriteEntry,
    PublishCount,
    PublishBucket,
    Unlock,
}

const REGISTER: [Reg; 7] = [
    Reg::Find,
    Reg::Lock,
    Reg::FindLocked,
    Reg::WriteEntry,
    Reg::PublishCount,
    Reg::PublishBucket,
    Reg::Unlock,
];

#[derive(Clone)]
struct Registrar {
    pc: usize,
    /// The label set it registers (0 or 1).
    labels: u8,
    /// The id it ends with.
    id: Option<usize>,
    /// It dies just before this step (None: lives).
    dies_at: Option<usize>,
    dead: bool,
}

#[derive(Clone)]
struct Registry {
    /// Entry words: the label set written at each id (None: never written).
    entries: [Option<u8>; 3],
    count: usize,
    /// One bucket per label set (the model's hash is the identity).
    buckets: [Option<usize>; 2],
    lock: Option<usize>,
    actors: [Registrar; 2],
    skip_find_locked: bool,
    crashed_between_count_and_bucket: bool,
}

impl Registry {
    fn find(&self, labels: u8) -> Option<usize> {
        let id = self.buckets[labels as usize]?;
        (id < self.count && self.entries[id] == Some(labels)).then_some(id)
    }
}

impl Model for Registry {
    const ACTORS: usize = 2;

    fn step(&mut self, actor: usize) -> bool {
        let me = self.actors[actor].clone();
        if me.dead || me.pc >= REGISTER.len() || me.id.is_some() && me.pc == usize::MAX {
            return false;
        }
        if me.dies_at == Some(me.pc) {
            if REGISTER[me.pc] == Reg::PublishBucket {
                self.crashed_between_count_and_bucket = true;
            }
            self.actors[actor].dead = true;
            if self.lock == Some(actor) {
                self.lock = None;
            }
            return true;
        }
        let labels = me.labels;
        let mut next = me.pc + 1;
        match REGISTER[me.pc] {
            Reg::Find => {
                if let Some(id) = self.find(labels) {
                    self.actors[actor].id = Some(id);
                    next = REGISTER.len();
                }
            }
            Reg::Lock => {
                if self.lock.is_some() {
                    return false;
                }
                self.lock = Some(actor);
            }
            Reg::FindLocked => {
                if !self.skip_find_locked
                    && let Some(id) = self.find(labels)
                {
                    self.actors[actor].id = Some(id);
                    next = REGISTER.len() - 1;
                }
            }
            Reg::WriteEntry => {
                let id = self.count;
                self.entries[id] = Some(labels);
                self.actors[actor].id = Some(id);
            }
            Reg::PublishCount => self.count += 1,
            Reg::PublishBucket => {
                let id = self.actors[actor].id.unwrap_or(0);
                if self.buckets[labels as usize]
                    .is_none_or(|old| old >= self.count || self.entries[old] != Some(labels))
                {
                    self.buckets[labels as usize] = Some(id);
                }
            }
            Reg::Unlock => self.lock = None,
        }
        self.actors[actor].pc = next;
        true
    }

    fn check(&self) -> Result<(), String> {
        // A published entry is never rewritten: an id once handed out keeps its labels.
        // (A registrar that died never handed its id out.)
        for actor in self.actors.iter().filter(|actor| !actor.dead) {
            if let Some(id) = actor.id
                && id < self.count
                && self.entries[id] != Some(actor.labels)
            {
                return Err(format!(
                    "id {id} handed out for {} now holds other labels",
                    actor.labels
                ));
            }
        }
        Ok(())
    }

    fn check_final(&self) -> Result<(), String> {
        let published: Vec<u8> = (0..self.count).filter_map(|id| self.entries[id]).collect();
        let distinct: HashSet<u8> = published.iter().copied().collect();
        if distinct.len() != published.len() && !self.crashed_between_count_and_bucket {
            return Err(format!("duplicate entries {published:?} with no crash"));
        }
        let live: Vec<&Registrar> = self.actors.iter().filter(|a| !a.dead).collect();
        if live.len() == 2 && live[0].labels == live[1].labels && live[0].id != live[1].id {
            return Err(format!(
                "one label set, two ids {:?} {:?}",
                live[0].id, live[1].id
            ));
        }
        Ok(())
    }
}

fn registry(labels: [u8; 2], dies_at: Option<usize>, skip_find_locked: bool) -> Registry {
    let actor = |labels, dies_at| Registrar {
        pc: 0,
        labels,
        id: None,
        dies_at,
        dead: false,
    };
    Registry {
        entries: [None; 3],
        count: 0,
        buckets: [None; 2],
        lock: None,
        actors: [actor(labels[0], dies_at), actor(labels[1], None)],
        skip_find_locked,
        crashed_between_count_and_bucket: false,
    }
}

#[test]
fn registry_never_duplicates_nor_rewrites_in_every_interleaving_and_crash() {
    let mut visited = 0;
    for labels in [[0, 0], [0, 1]] {
        for dies_at in std::iter::once(None).chain((0..REGISTER.len()).map(Some)) {
            explore(&registry(labels, dies_at, false), &mut visited)
                .unwrap_or_else(|error| panic!("labels {labels:?}, dies at {dies_at:?}: {error}"));
        }
    }
    assert!(visited > 1000, "explored {visited} steps");
}

#[test]
fn mutant_registry_without_second_look_is_caught() {
    let mut visited = 0;
    let error = explore(&registry([0, 0], None, true), &mut visited)
        .expect_err("without a look under the lock, two registrations duplicate");
    assert!(
        error.contains("duplicate") || error.contains("two ids"),
        "{error}"
    );
}

// ---- a busy registry: answers pending in the worker's slot, then registered ----

/// One worker answers one new label set `ANSWERS` times while another process holds the
/// registry lock and lets it go at any point (issue 40): each answer looks in the index,
/// tries the lock (never waits), and counts either in the registry (registering first) or
/// in a pending label set of its slot (written, then published). A reader takes two totals
/// in file order (label count, the slot's pending count, the registry's counter, the
/// pending counter). Checked: each total lies between the answers returned before the read
/// began and after it ended, never decreases, and the last equals every answer. The mutant
/// moves the pending count into the registry at registration (add, then zero).
#[derive(Clone)]
struct Busy {
    other_holds_lock: bool,
    registered: bool,
    registry_counter: u64,
    pending_published: bool,
    pending_counter: u64,
    /// The worker: answers done, its step within the answer, the value it loaded.
    answered: u64,
    step: BusyStep,
    loaded: u64,
    /// The reader: its pc, the total it is building, what it read first.
    reader_pc: usize,
    saw_registered: bool,
    saw_pending: bool,
    partial: u64,
    floor: u64,
    last_total: u64,
    totals_taken: usize,
    /// The first total that broke a rule, said.
    broken: Option<String>,
    move_pending: bool,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum BusyStep {
    Find,
    TryLock,
    Register,
    MoveAdd,
    MoveZero,
    WritePending,
    PublishPending,
    LoadRegistry,
    StoreRegistry,
    LoadPending,
    StorePending,
}

const ANSWERS: u64 = 3;

impl Busy {
    fn new(move_pending: bool) -> Busy {
        Busy {
            other_holds_lock: true,
            registered: false,
            registry_counter: 0,
            pending_published: false,
            pending_counter: 0,
            answered: 0,
            step: BusyStep::Find,
            loaded: 0,
            reader_pc: 0,
            saw_registered: false,
            saw_pending: false,
            partial: 0,
            floor: 0,
            last_total: 0,
            totals_taken: 0,
            broken: None,
            move_pending,
        }
    }
}

impl Model for Busy {
    const ACTORS: usize = 3;

    fn step(&mut self, actor: usize) -> bool {
        match actor {
            // The other process lets the lock go, once, at any point.
            0 => std::mem::replace(&mut self.other_holds_lock, false),
            1 => {
                if self.answered == ANSWERS {
                    return false;
                }
                use BusyStep::*;
                self.step = match self.step {
                    Find if self.registered => LoadRegistry,
                    Find => TryLock,
                    TryLock if self.other_holds_lock && self.pending_published => LoadPending,
                    TryLock if self.other_holds_lock => WritePending,
                    TryLock => Register,
                    Register => {
                        self.registered = true;
                        if self.move_pending && self.pending_counter > 0 {
                            MoveAdd
                        } else {
                            LoadRegistry
                        }
                    }
                    MoveAdd => {
                        self.registry_counter += self.pending_counter;
                        MoveZero
                    }
                    MoveZero => {
                        self.pending_counter = 0;
                        LoadRegistry
                    }
                    WritePending => PublishPending,
                    PublishPending => {
                        self.pending_published = true;
                        LoadPending
                    }
                    LoadRegistry => {
                        self.loaded = self.registry_counter;
                        StoreRegistry
                    }
                    LoadPending => {
                        self.loaded = self.pending_counter;
                        StorePending
                    }
                    StoreRegistry | StorePending => {
                        if self.step == StoreRegistry {
                            self.registry_counter = self.loaded + 1;
                        } else {
                            self.pending_counter = self.loaded + 1;
                        }
                        // Counted before resolve() returns it.
                        self.answered += 1;
                        Find
                    }
                };
                true
            }
            _ => {
                if self.totals_taken == READS {
                    return false;
                }
                match self.reader_pc {
                    0 => {
                        self.floor = self.answered;
                        self.saw_registered = self.registered;
                    }
                    1 => self.saw_pending = self.pending_published,
                    2 => {
                        self.partial = if self.saw_registered {
                            self.registry_counter
                        } else {
                            0
                        }
                    }
                    _ => {
                        if self.saw_pending {
                            self.partial += self.pending_counter;
                        }
                    }
                }
                self.reader_pc += 1;
                if self.reader_pc == 4 {
                    self.reader_pc = 0;
                    self.totals_taken += 1;
                    let total = self.partial;
                    if total < self.floor || total > self.answered {
                        self.broken = Some(format!(
                            "a total ({total}) outside the answers returned during its read \
                             ({} to {})",
                            self.floor, self.answered
                        ));
                    } else if total < self.last_total {
                        self.broken = Some(format!(
                            "a total went down ({} to {total})",
                            self.last_total
                        ));
                    }
                    self.last_total = total;
                }
                true
            }
        }
    }

    fn check(&self) -> Result<(), String> {
        self.broken.clone().map_or(Ok(()), Err)
    }

    fn check_final(&self) -> Result<(), String> {
        let total = self.registry_counter + self.pending_counter;
        if total != self.answered || self.answered != ANSWERS {
            return Err(format!("counted {total} of {} answers", self.answered));
        }
        Ok(())
    }
}

#[test]
fn a_busy_registry_counts_every_answer_once_and_totals_never_go_down() {
    let mut visited = 0;
    explore(&Busy::new(false), &mut visited).unwrap();
    assert!(visited > 1000, "explored {visited} steps");
}

#[test]
fn mutant_moving_the_pending_count_is_caught() {
    let mut visited = 0;
    let error = explore(&Busy::new(true), &mut visited)
        .expect_err("moving a pending count makes a reader see a total go down or count twice");
    assert!(
        error.contains("went down") || error.contains("outside"),
        "{error}"
    );
}
