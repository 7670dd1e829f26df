//! Tests of the training loop, and the small network and data other modules' tests share.

use super::*;
use crate::net::QuantSlot;
use cptsim_nn::data::synthetic;
use cptsim_nn::init::{conv_weight, linear_weight_bias};
use cptsim_nn::layers::*;
use cptsim_nn::net::Graph;
use cptsim_nn::quant::{LayerQuant, QuantMethod};
use cptsim_traces::schedule::ScheduleArgs;
use cptsim_traces::Bits;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// conv-bn-relu-pool → fc on 1×8×8 inputs, 4 classes; slots 0 (first) and 1 (last).
/// All layers quantized when `all`, else the classifier stays fp32.
pub(crate) fn small_net_scoped(seed: u64, all: bool) -> TrainNet {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut g = Graph::new();
    let spec = Conv2dSpec::square(1, 6, 3, 1, 1);
    let q = |i: u64| LayerQuant::new(QuantMethod::Sbm, seed ^ i);
    g.then(Conv2d::new("c1", spec, conv_weight(&mut rng, 6, [3, 3], 1), None, q(1)).unwrap())
        .unwrap();
    g.then(BatchNorm::new("b1", 6)).unwrap();
    g.then(Activation::new("r1", ActivationKind::Relu)).unwrap();
    g.then(Pool2d::new("p1", PoolKind::Max, PoolSpec::square(2, 2)).unwrap())
        .unwrap();
    g.then(Flatten::new("flat")).unwrap();
    let (w, b) = linear_weight_bias(&mut rng, 4, 6 * 4 * 4);
    g.then(Linear::new("fc", w, Some(b), q(2)).unwrap())
        .unwrap();
    let slots = vec![
        QuantSlot {
            layer: 0,
            quantized: true,
            fixed: None,
        },
        QuantSlot {
            layer: 1,
            quantized: false,
            fixed: None,
        },
    ];
    let mut net = TrainNet::new(g, slots, [1, 8, 8], 4).unwrap();
    net.slots[1].quantized = all;
    net
}

/// The classifier stays fp32 (CIFAR scope).
pub(crate) fn small_net(seed: u64) -> TrainNet {
    small_net_scoped(seed, false)
}

pub(crate) fn small_data() -> TrainData {
    let all = synthetic(712, [1, 8, 8], 4, 40.0, 5).unwrap();
    let (train, test) = all.split_validation(200.0 / 712.0, 1).unwrap();
    TrainData {
        train,
        test,
        val: None,
    }
}

pub(crate) fn config(iters: u64) -> TrainConfig {
    TrainConfig {
        batch: 32,
        eval_every: 10,
        ..TrainConfig::new(iters, 0.05)
    }
}

fn cosine(iters: u64) -> Box<dyn Policy> {
    let s = ScheduleArgs::new("cosine", iters)
        .cycles(2)
        .build()
        .unwrap();
    Box::new(crate::SchedulePolicy(s))
}

#[test]
fn learns_records_rle_trace_and_evaluates() {
    let data = small_data();
    let mut tr = Trainer::new(small_net(1), &data, config(40), cosine(40)).unwrap();
    let mut evals = 0;
    while !tr.done() {
        evals += usize::from(tr.step().unwrap().eval.is_some());
    }
    assert_eq!(evals, 4);
    let last = tr.state.evals.last().unwrap();
    assert!(last.test_acc > 0.8, "{last:?}");
    assert_eq!((last.fw, last.bw), (8, 8), "end of a cycle is B_max");
    let rows = tr.rows();
    // Two cycles of 20 iterations, FW 3..8: six spans each, two layers per span.
    let spans: Vec<_> = rows.iter().filter(|r| r.layer == 0).collect();
    assert_eq!(spans.len(), 12);
    assert_eq!(spans[0].bits, Bits::forward_backward(3, 8));
    assert_eq!(spans.last().map(|r| r.iter_end), Some(40));
    assert!(rows
        .iter()
        .filter(|r| r.layer == 1)
        .all(|r| r.bits.is_fp32()));
    let covered: u64 = spans.iter().map(|r| r.iterations()).sum();
    assert_eq!(covered, 40);
    assert!(tr.step().is_err(), "no iteration past the end");
}

#[test]
fn same_seed_same_run_and_threads_do_not_matter() {
    let data = small_data();
    let run = |threads: usize| {
        cptsim_testdata::with_threads(threads, || {
            let mut tr = Trainer::new(small_net(2), &data, config(15), cosine(15)).unwrap();
            while !tr.done() {
                tr.step().unwrap();
            }
            (
                tr.state.clone(),
                tr.net
                    .graph
                    .params_mut()
                    .iter()
                    .map(|p| p.value.clone())
                    .collect::<Vec<_>>(),
            )
        })
        .unwrap()
    };
    assert_eq!(run(1), run(2));
}

#[test]
fn exploding_loss_stops_with_a_clear_error() {
    let data = small_data();
    let cfg = TrainConfig {
        lr: LrPolicy {
            base_lr: 1e4,
            ..config(1).lr
        },
        max_loss: 50.0,
        ..config(30)
    };
    let mut tr = Trainer::new(small_net(3), &data, cfg, cosine(30)).unwrap();
    let err = loop {
        match tr.step() {
            Ok(_) => continue,
            Err(e) => break e,
        }
    };
    let msg = err.to_string();
    assert!(matches!(err, SimError::Diverged { .. }), "{msg}");
    assert!(msg.contains("diverged at iteration"), "{msg}");
}

fn never() -> bool {
    false
}

fn always() -> bool {
    true
}

#[test]
fn an_evaluation_in_pieces_equals_the_whole_and_stops_when_asked() {
    let data = small_data();
    let run = |stop: Option<fn() -> bool>| {
        let mut tr = Trainer::new(small_net(5), &data, config(20), cosine(20)).unwrap();
        while !tr.done() {
            match stop {
                Some(f) => tr.step_until(&f).unwrap(),
                None => tr.step().unwrap(),
            };
        }
        (tr.state.clone(), tr.evaluate(&data.test).unwrap())
    };
    let (whole, pieces) = (run(None), run(Some(never)));
    assert_eq!(whole, pieces);
    assert_eq!(whole.0.evals.len(), 2);
    // A stop requested during the evaluation after iteration 10 leaves it pending.
    let mut tr = Trainer::new(small_net(5), &data, config(20), cosine(20)).unwrap();
    for _ in 0..9 {
        tr.step().unwrap();
    }
    let e = tr.step_until(&always).unwrap_err();
    assert!(matches!(e, SimError::Interrupted { iteration: 10 }), "{e}");
    assert!(tr.state.pending.is_some() && tr.state.evals.is_empty());
    let rec = tr.finish_evaluation().unwrap().unwrap();
    assert_eq!(rec, whole.0.evals[0]);
    assert_eq!(tr.finish_evaluation().unwrap(), None);
    while !tr.done() {
        tr.step().unwrap();
    }
    assert_eq!(tr.state, whole.0);
}

#[test]
fn quantizer_none_records_fp32() {
    let data = small_data();
    let cfg = TrainConfig {
        quantize: false,
        ..config(3)
    };
    let mut tr = Trainer::new(small_net(4), &data, cfg, cosine(3)).unwrap();
    while !tr.done() {
        tr.step().unwrap();
    }
    assert!(tr.rows().iter().all(|r| r.bits.is_fp32()));
}
