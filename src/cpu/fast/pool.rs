//! The native row-split pool: `threads() − 1` helper threads that take chunks of a split
//! together with the thread that submits it, and spin between splits instead of sleeping.
//!
//! A decode step is ~115 splits (every GEMV, the attention heads), each tens of
//! microseconds long; handing each to rayon cost a steal and, for a worker that had gone
//! idle, a `sched_yield` round or a futex wake (perf: ~11% of two-thread decode in the
//! scheduler). Here a split is published by one atomic store, a helper claims chunks by
//! compare-and-swap, and the submitter works on chunks too, then waits for the last. A
//! helper that finds nothing to do for [`SPIN`] parks on a condition variable (between
//! requests, an idle pool costs nothing). The threaded wasm build keeps rayon (its Web
//! Workers come from `wasm-bindgen-rayon`).
//!
//! One split runs at a time: a split submitted while another runs (another model's
//! thread, or a task that splits again) runs its chunks in order on its own thread.

use std::any::Any;
use std::cell::UnsafeCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a helper spins for the next split before it parks: far longer than the gaps
/// between a step's splits, far shorter than a human notices.
const SPIN: Duration = Duration::from_micros(500);

/// Spins between yields of the core (when the machine has more busy threads than cores,
/// the thread being waited for may need it).
const YIELD_EVERY: u32 = 256;

/// One round of a spin wait.
fn spin(spins: &mut u32) {
    *spins = spins.wrapping_add(1);
    if spins.is_multiple_of(YIELD_EVERY) {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// Bits of `state` for each of a split's chunk count and next unclaimed chunk.
const BITS: u32 = 20;
const MASK: u64 = (1 << BITS) - 1;

/// A split's task: run chunk `i`.
type Task<'a> = &'a (dyn Fn(usize) + Sync);

pub struct Pool {
    threads: usize,
    /// `[epoch | chunks | next]`: the split published (its epoch tells splits apart, so a
    /// stale claim fails) and its next unclaimed chunk.
    state: AtomicU64,
    /// The published split's task. Written only while no chunk is outstanding (by the
    /// submitter, before it publishes), read only by a thread holding a claimed chunk.
    task: UnsafeCell<Option<Task<'static>>>,
    /// Chunks of the published split finished.
    done: AtomicUsize,
    /// The first panic of the published split's chunks, raised again by the submitter.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    submit: Mutex<()>,
    /// Helpers parked (under `wake`'s mutex), read first without it.
    parked: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
}

// SAFETY: `task` is accessed as its doc says (the other fields are Sync).
unsafe impl Sync for Pool {}

/// The process's pool, with as many threads as rayon's global pool
/// (`RAYON_NUM_THREADS`, else the cores), started on first use.
pub fn pool() -> &'static Pool {
    static POOL: OnceLock<&'static Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let pool: &'static Pool = Box::leak(Box::new(Pool::new(rayon::current_num_threads())));
        for i in 1..pool.threads {
            let started = std::thread::Builder::new()
                .name(format!("pocketrt-rows-{i}"))
                .spawn(move || pool.help());
            if started.is_err() {
                // Fewer helpers: the submitter still runs every chunk nobody else claims.
                break;
            }
        }
        pool
    })
}

impl Pool {
    fn new(threads: usize) -> Pool {
        Pool {
            threads: threads.max(1),
            state: AtomicU64::new(0),
            task: UnsafeCell::new(None),
            done: AtomicUsize::new(0),
            panic: Mutex::new(None),
            submit: Mutex::new(()),
            parked: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    /// Run `task(i)` for every `i < chunks`, each once, on this thread and the helpers;
    /// returns when all have run (raising the first panic of any).
    pub fn run(&self, chunks: usize, task: &(dyn Fn(usize) + Sync)) {
        let guard = match self.submit.try_lock() {
            Ok(g) if self.threads > 1 && chunks > 1 && chunks as u64 <= MASK => g,
            _ => return (0..chunks).for_each(task),
        };
        // SAFETY: no chunk is outstanding (every split waits for all of its chunks, and
        // this thread holds `submit`), so no thread reads `task`. The borrow outlives its
        // use: this call returns only once every claimed chunk has finished.
        unsafe {
            *self.task.get() = Some(std::mem::transmute::<Task<'_>, Task<'static>>(task));
        }
        self.done.store(0, Ordering::Relaxed);
        let epoch = (self.state.load(Ordering::Relaxed) >> (2 * BITS)) + 1;
        let published = epoch << (2 * BITS) | (chunks as u64) << BITS;
        self.state.store(published, Ordering::SeqCst);
        if self.parked.load(Ordering::SeqCst) > 0 {
            let _lock = self.sleep.lock().unwrap_or_else(|e| e.into_inner());
            self.wake.notify_all();
        }
        self.work();
        let mut spins = 0u32;
        while self.done.load(Ordering::Acquire) < chunks {
            spin(&mut spins);
        }
        drop(guard);
        let panic = self.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(payload) = panic {
            resume_unwind(payload);
        }
    }

    /// Whether `state` has a chunk left to claim.
    fn has_work(state: u64) -> bool {
        (state & MASK) < (state >> BITS & MASK)
    }

    /// Claim and run chunks of the published split until none is left.
    fn work(&self) {
        loop {
            let s = self.state.load(Ordering::Acquire);
            if !Self::has_work(s) {
                return;
            }
            let claimed =
                self.state
                    .compare_exchange_weak(s, s + 1, Ordering::AcqRel, Ordering::Relaxed);
            if claimed.is_err() {
                continue;
            }
            // SAFETY: chunk `s & MASK` is claimed and not finished, so the submitter waits
            // and `task` holds its split's task (published before `state`).
            let task = unsafe { (*self.task.get()).expect("a published split") };
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| task((s & MASK) as usize))) {
                let mut first = self.panic.lock().unwrap_or_else(|e| e.into_inner());
                first.get_or_insert(payload);
            }
            self.done.fetch_add(1, Ordering::Release);
        }
    }

    /// A helper thread: work, spin for the next split, park after [`SPIN`].
    fn help(&self) {
        loop {
            self.work();
            let idle = Instant::now();
            let mut spins = 0u32;
            while !Self::has_work(self.state.load(Ordering::Acquire)) {
                spin(&mut spins);
                if spins.is_multiple_of(YIELD_EVERY) && idle.elapsed() > SPIN {
                    self.park();
                    break;
                }
            }
        }
    }

    /// Sleep until a split is published.
    fn park(&self) {
        let mut lock = self.sleep.lock().unwrap_or_else(|e| e.into_inner());
        self.parked.fetch_add(1, Ordering::SeqCst);
        while !Self::has_work(self.state.load(Ordering::SeqCst)) {
            lock = self.wake.wait(lock).unwrap_or_else(|e| e.into_inner());
        }
        self.parked.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    fn pool_of(threads: usize) -> &'static Pool {
        let pool: &'static Pool = Box::leak(Box::new(Pool::new(threads)));
        for _ in 1..threads {
            std::thread::spawn(move || pool.help());
        }
        pool
    }

    #[test]
    fn every_chunk_runs_once_in_every_split() {
        let pool = pool_of(3);
        for chunks in [0, 1, 2, 7, 64, 1000] {
            for _ in 0..50 {
                let runs: Vec<AtomicU32> = (0..chunks).map(|_| AtomicU32::new(0)).collect();
                pool.run(chunks, &|i| {
                    runs[i].fetch_add(1, Ordering::Relaxed);
                });
                assert!(
                    runs.iter().all(|r| r.load(Ordering::Relaxed) == 1),
                    "{chunks}"
                );
            }
        }
    }

    /// Whether a helper takes a chunk of a split within a few tries (a loaded machine may
    /// not run it at once).
    fn a_helper_takes_a_chunk(pool: &Pool) -> bool {
        let me = std::thread::current().id();
        (0..100).any(|_| {
            let others = AtomicU32::new(0);
            pool.run(64, &|_| {
                std::thread::sleep(Duration::from_micros(200));
                if std::thread::current().id() != me {
                    others.fetch_add(1, Ordering::Relaxed);
                }
            });
            others.load(Ordering::Relaxed) > 0
        })
    }

    #[test]
    fn helpers_take_chunks_and_wake_from_parking() {
        let pool = pool_of(2);
        assert!(a_helper_takes_a_chunk(pool), "the helper took no chunk");
        let idle = Instant::now();
        while pool.parked.load(Ordering::SeqCst) == 0 {
            assert!(
                idle.elapsed() < Duration::from_secs(10),
                "the idle helper never parked"
            );
            std::thread::sleep(SPIN);
        }
        assert!(
            a_helper_takes_a_chunk(pool),
            "the parked helper was not woken"
        );
    }

    #[test]
    fn a_panic_in_a_chunk_reaches_the_submitter_after_every_chunk_ran() {
        let pool = pool_of(2);
        let runs = AtomicU32::new(0);
        let caught = catch_unwind(AssertUnwindSafe(|| {
            pool.run(16, &|i| {
                runs.fetch_add(1, Ordering::Relaxed);
                assert!(i != 5, "chunk five");
            })
        }));
        let payload = caught.unwrap_err();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned());
        assert_eq!(message.as_deref(), Some("chunk five"));
        assert_eq!(runs.load(Ordering::Relaxed), 16);
        // The pool still works.
        let after = AtomicU32::new(0);
        pool.run(8, &|_| {
            after.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(after.load(Ordering::Relaxed), 8);
    }

    #[test]
    fn a_split_inside_a_split_runs_in_order_on_its_thread() {
        let pool = pool_of(2);
        let total = AtomicU32::new(0);
        pool.run(4, &|_| {
            pool.run(3, &|_| {
                total.fetch_add(1, Ordering::Relaxed);
            })
        });
        assert_eq!(total.load(Ordering::Relaxed), 12);
    }
}
