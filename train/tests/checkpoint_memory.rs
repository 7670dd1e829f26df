//! Saving a checkpoint streams the tensors to the file: the memory it takes beyond the run's is
//! a small fraction of the checkpoint's size (it used to copy every tensor and build the whole
//! file in memory, three times the parameters' size, which ran a 632 M-parameter ViT out of
//! memory).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use cptsim_nn::data::synthetic;
use cptsim_nn::init::linear_weight_bias;
use cptsim_nn::layers::{Flatten, Linear};
use cptsim_nn::net::Graph;
use cptsim_nn::quant::{LayerQuant, QuantMethod};
use cptsim_traces::schedule::ScheduleArgs;
use cptsim_train::policy::schedule::SchedulePolicy;
use cptsim_train::{checkpoint, QuantSlot, TrainConfig, TrainData, TrainNet, Trainer};
use rand::SeedableRng;

/// The system allocator, counting the bytes live and the most live since [`reset_peak`].
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
            PEAK.fetch_max(now, Ordering::SeqCst);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn reset_peak() -> usize {
    let live = LIVE.load(Ordering::SeqCst);
    PEAK.store(live, Ordering::SeqCst);
    live
}

#[test]
fn saving_a_checkpoint_takes_little_memory_beyond_the_run() {
    let all = synthetic(96, [1, 32, 32], 10, 40.0, 3).unwrap();
    let (train, test) = all.split_validation(32.0 / 96.0, 1).unwrap();
    let data = TrainData {
        train,
        test,
        val: None,
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let mut g = Graph::new();
    g.then(Flatten::new("flat")).unwrap();
    let (w, b) = linear_weight_bias(&mut rng, 512, 1024);
    let q = LayerQuant::new(QuantMethod::Sbm, 1);
    g.then(Linear::new("fc1", w, Some(b), q.clone()).unwrap())
        .unwrap();
    let (w, b) = linear_weight_bias(&mut rng, 10, 512);
    g.then(Linear::new("fc2", w, Some(b), q).unwrap()).unwrap();
    let slots = (0..2)
        .map(|layer| QuantSlot {
            layer,
            quantized: true,
            fixed: None,
        })
        .collect();
    let net = TrainNet::new(g, slots, [1, 32, 32], 10).unwrap();
    let schedule = ScheduleArgs::new("static", 4).build().unwrap();
    let config = TrainConfig {
        batch: 16,
        eval_every: 4,
        ..TrainConfig::new(4, 0.05)
    };
    let mut tr = Trainer::new(net, &data, config, Box::new(SchedulePolicy(schedule))).unwrap();
    tr.step().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("checkpoint.bin");
    let before = reset_peak();
    checkpoint::save(&path, &mut tr, serde_json::json!({"k": 1})).unwrap();
    let extra = PEAK.load(Ordering::SeqCst) - before;
    let size = std::fs::metadata(&path).unwrap().len() as usize;
    assert!(
        size > 4 * 512 * 1024 * 2,
        "parameters and velocities: {size} bytes"
    );
    assert!(
        extra < size / 8,
        "saving took {extra} bytes beyond the run's for a checkpoint of {size}"
    );
    // What was streamed is what `encode` builds in memory, and it loads.
    assert_eq!(
        std::fs::read(&path).unwrap(),
        checkpoint::encode(&mut tr, serde_json::json!({"k": 1})).unwrap()
    );
    checkpoint::load(&path).unwrap();
}
