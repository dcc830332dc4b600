//! Every command in the command table, called with random arguments of
//! every shape a client might send (missing, extra, wrong types, huge or
//! negative numbers, option words in odd places), on keys of every type.
//!
//! A command that panics is caught by the dispatcher and answered with an
//! "internal error" reply (the server survives), so that reply is what this
//! sweep looks for: every one is a bug. After the sweep the store must
//! still pass its full check. This found READONLY indexing a subcommand it
//! does not have. The words, keys and checks are the `commands` fuzz
//! target's (`fuzz/fuzz_targets/commands_logic.rs`); its decoding of raw
//! bytes into commands runs here too, on random inputs.

use std::sync::Arc;

use tembo_server::resp::Reply;
use tembo_server::Session;
use tembo_store::{Db, Engine, Options};

mod logic {
    include!("../../../fuzz/fuzz_targets/commands_logic.rs");
}
use logic::{names, note_bugs, seed_keys, KEYS, WORDS};

/// A small deterministic generator (the sweep must be reproducible).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
}

fn sweep(engine: Engine, seed: u64, calls_per_arity: usize) {
    let db = Arc::new(Db::in_memory(&Options { engine, ..Options::with_size(64 << 20) }).unwrap());
    let mut s = Session::new(db.clone()).unwrap();
    let mut rng = Rng(seed);
    let mut bugs = Vec::new();
    let mut calls = 0;
    for name in names(&mut s) {
        // Back to a plain client (no MULTI, subscriptions, tracking, REPLY
        // OFF or selected database left over from the last command).
        seed_keys(&mut s).unwrap();
        let base: Vec<String> = name.split('|').map(str::to_string).collect();
        for extra in 0..7 {
            for _ in 0..if extra == 0 { 1 } else { calls_per_arity } {
                let mut args = base.clone();
                for i in 0..extra {
                    let key_here = i == 0 || rng.next() % 5 == 0;
                    args.push(if key_here { rng.pick(KEYS) } else { rng.pick(WORDS) }.to_string());
                }
                calls += 1;
                let reply = s.call(&args);
                if std::env::var_os("SWEEP_TRACE").is_some() {
                    eprintln!("{args:?} -> {reply:?}");
                }
                let queued = reply == Reply::Simple("QUEUED".into());
                note_bugs(&args, &reply, &mut bugs);
                if queued && rng.next() % 4 == 0 {
                    // Run what MULTI queued: EXEC's replies are swept too.
                    note_bugs(&args, &s.call(&["EXEC"]), &mut bugs);
                }
                if calls % 50 == 0 {
                    s.background();
                }
            }
        }
    }
    assert!(calls > 1000, "only {calls} calls");
    assert!(bugs.is_empty(), "{} commands panicked:\n{}", bugs.len(), bugs.join("\n"));
    let report = db.check().unwrap();
    assert!(report.is_ok(), "store check after the sweep: {report:?}");
}

#[test]
fn no_command_panics_on_random_arguments_cdds() {
    // SWEEP_SEEDS=n sweeps n more seeds (a longer hunt than CI's).
    let more: u64 = std::env::var("SWEEP_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    for seed in [0x9E37_79B9_7F4A_7C15, 7, 12345].into_iter().chain((1..=more).map(|i| i * 0x2545_F491_4F6C_DD1D)) {
        sweep(Engine::Cdds, seed, 4);
    }
}

#[test]
fn no_command_panics_on_random_arguments_kamino() {
    sweep(Engine::Kamino, 99, 3);
}

/// The fuzz target's decoding on random bytes (`COMMAND_FUZZ_INPUTS` sets
/// how many; a longer hunt than CI's is `cargo fuzz run commands`).
#[test]
fn no_command_panics_on_fuzzed_inputs() {
    let inputs: u64 = std::env::var("COMMAND_FUZZ_INPUTS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let db = Arc::new(Db::in_memory(&Options::with_size(64 << 20)).unwrap());
    let names = names(&mut Session::new(db.clone()).unwrap());
    let mut rng = Rng(0x51_7CC1_B727_220A);
    let mut bugs = Vec::new();
    for _ in 0..inputs {
        let len = (rng.next() % 200) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        bugs.extend(logic::run_input(&db, &names, &data));
    }
    assert!(bugs.is_empty(), "{} commands panicked:\n{}", bugs.len(), bugs.join("\n"));
    let report = db.check().unwrap();
    assert!(report.is_ok(), "store check after the inputs: {report:?}");
}
