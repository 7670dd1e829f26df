//! DFQ's and FracTrain's tests: the two executions against each other, a ResNet-20 run that
//! resumes exactly, thread-count independence, the cost term, FracTrain's target steps and the
//! settings' checks; and the finite-difference check of the gate's and the LSTM's gradients.

use super::*;
use crate::{checkpoint, TrainConfig, TrainData, TrainNet, Trainer};
use cptsim_nn::build::{build_network, BuildOptions, Init};
use cptsim_nn::data::synthetic;

fn data() -> TrainData {
    let all = synthetic(96, [3, 32, 32], 10, 20.0, 3).unwrap();
    let (train, test) = all.split_validation(32.0 / 96.0, 1).unwrap();
    TrainData {
        train,
        test,
        val: None,
    }
}

/// FracTrain's CIFAR steps (Δcp 0.5, 3 turning points) with indicator constants ε, α.
fn fractrain_steps(epsilon: f64, alpha: f64) -> FracTrainConfig {
    FracTrainConfig {
        cp_step: 0.5,
        turns: 3,
        epsilon,
        alpha,
    }
}

fn trainer(data: &TrainData, iters: u64, fractrain: bool) -> Trainer<'_> {
    let cfg = DfqConfig::new(CandidateSet::Cifar, 4, 3.0);
    trainer_with(data, iters, fractrain, cfg, DfqExec::Selected)
}

fn trainer_with(
    data: &TrainData,
    iters: u64,
    fractrain: bool,
    mut cfg: DfqConfig,
    exec: DfqExec,
) -> Trainer<'_> {
    let ir = cptsim_models::load_graph("zoo:resnet20", 8).unwrap();
    let summary = ir.summary();
    let opts = BuildOptions {
        init: Init::Seeded(1),
        ..BuildOptions::default()
    };
    let build = || TrainNet::from_network(build_network(&ir, &opts).unwrap()).unwrap();
    let mut net = build();
    let blocks = find_blocks(&ir, &summary).unwrap();
    if fractrain {
        cfg.target_cp = 1.5;
        // ε = 10 with α = 1: every fifth check is a plateau.
        cfg.fractrain = Some(fractrain_steps(10.0, 1.0));
    }
    let k = cfg.candidates.len();
    let mut dfq = Dfq::new(cfg, &blocks, &summary, &mut net.graph, 1).unwrap();
    if exec == DfqExec::All {
        let replicas = (0..k).map(|_| build().graph).collect();
        dfq = dfq.with_replicas(&net.graph, replicas).unwrap();
    }
    let config = TrainConfig {
        batch: 8,
        eval_every: 1,
        eval_batch: 16,
        ..TrainConfig::new(iters, 0.05)
    };
    Trainer::new(net, data, config, Box::new(dfq)).unwrap()
}

/// The trainer's DFQ policy.
fn dfq<'t>(tr: &'t Trainer<'_>) -> &'t Dfq {
    tr.policy_as::<Dfq>().unwrap()
}

fn finish(
    mut tr: Trainer<'_>,
) -> (
    Vec<cptsim_traces::TraceRow>,
    Vec<Tensor>,
    Vec<Vec<f32>>,
    Vec<f64>,
) {
    while !tr.done() {
        tr.step().unwrap();
    }
    let params = tr.param_values();
    let buffers = tr.net.graph.buffer_values();
    let cp = dfq(&tr).state.cp.clone();
    (tr.rows(), params, buffers, cp)
}

#[test]
fn exact_execution_with_one_candidate_is_the_selected_path_bit_for_bit() {
    let data = data();
    let one = || {
        let mut cfg = DfqConfig::new(CandidateSet::Cifar, 4, 3.0);
        cfg.candidates = vec![Candidate { act: 4, err: 8 }];
        cfg
    };
    let selected = finish(trainer_with(&data, 3, false, one(), DfqExec::Selected));
    let tr = trainer_with(&data, 3, false, one(), DfqExec::All);
    assert_eq!(tr.policy_as::<Dfq>().map(Dfq::exec), Some(DfqExec::All));
    // nine back-to-back blocks; the last ends like the plain block before it, after the
    // residual add and its ReLU (conv, bn, relu, conv, bn, add, relu)
    let ranges = &dfq(&tr).exact.as_ref().unwrap().ranges;
    assert_eq!(ranges.len(), 9);
    assert!(
        ranges.windows(2).all(|w| w[0].end == w[1].start),
        "{ranges:?}"
    );
    assert_eq!(ranges[8].len(), 7);
    assert_eq!(ranges[7].len(), 7);
    let all = finish(tr);
    assert_eq!(selected, all);
}

#[test]
fn exact_execution_gives_the_gate_the_task_gradient_and_is_deterministic() {
    let data = data();
    let gate_grads = |exec: DfqExec| {
        let mut cfg = DfqConfig::new(CandidateSet::Cifar, 4, 3.0);
        cfg.beta = 0.0;
        let mut tr = trainer_with(&data, 1, false, cfg, exec);
        tr.step().unwrap();
        let d = tr.policy_as_mut::<Dfq>().unwrap();
        d.gate
            .params_mut()
            .iter()
            .map(|p| p.grad.iter().map(|v| v.abs()).sum::<f32>())
            .sum::<f32>()
    };
    // without the cost term the selected path leaves the gate untouched; the exact one not
    assert_eq!(gate_grads(DfqExec::Selected), 0.0);
    assert!(gate_grads(DfqExec::All) > 0.0);
    let mut tr = trainer_with(
        &data,
        2,
        false,
        DfqConfig::new(CandidateSet::Cifar, 4, 3.0),
        DfqExec::All,
    );
    tr.step().unwrap();
    tr.step().unwrap();
    let ratios = &dfq(&tr).state.task_to_cost;
    assert!(
        ratios.len() == 2 && ratios.iter().all(|r| r.is_finite() && *r > 0.0),
        "{ratios:?}"
    );

    let run = |threads: usize| {
        cptsim_testdata::with_threads(threads, || {
            let cfg = DfqConfig::new(CandidateSet::Cifar, 4, 3.0);
            finish(trainer_with(&data, 2, false, cfg, DfqExec::All))
        })
        .unwrap()
    };
    let (rows, params, buffers, cp) = run(1);
    assert_eq!(run(2), (rows.clone(), params, buffers, cp));
    let per_iter: u64 = rows
        .iter()
        .filter(|r| r.iter_start == 0 && r.layer == 1)
        .map(|r| r.samples)
        .sum();
    assert_eq!(per_iter, 8);

    // checkpoint after 1 of 2 iterations, resume with fresh replicas: the same run
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ck.bin");
    let cfg = || DfqConfig::new(CandidateSet::Cifar, 4, 3.0);
    let mut part = trainer_with(&data, 2, false, cfg(), DfqExec::All);
    part.step().unwrap();
    checkpoint::save(&path, &mut part, serde_json::Value::Null).unwrap();
    let mut resumed = trainer_with(&data, 2, false, cfg(), DfqExec::All);
    checkpoint::load(&path)
        .unwrap()
        .restore(&mut resumed)
        .unwrap();
    assert_eq!(finish(resumed), run(1));
}

#[test]
fn resnet20_trains_with_per_sample_mix_in_the_trace_and_resumes_exactly() {
    let data = data();
    let mut tr = trainer(&data, 3, false);
    assert_eq!(tr.policy_as::<Dfq>().map(Dfq::blocks), Some(9));
    while !tr.done() {
        tr.step().unwrap();
    }
    let rows = tr.rows();
    let roles: Vec<_> = cptsim_models::load_summary("zoo:resnet20", 1)
        .unwrap()
        .layers
        .iter()
        .map(|l| l.role)
        .collect();
    assert_eq!(roles.len(), 22);
    for t in 0..3 {
        for layer in 0..22u32 {
            let at: Vec<_> = rows
                .iter()
                .filter(|r| r.layer == layer && r.iter_start == t)
                .collect();
            let n: u64 = at.iter().map(|r| r.samples).sum();
            assert_eq!(n, 8, "layer {layer}, iteration {t}");
            let gated = at.iter().all(|r| r.bits.w == 4 && r.bits.a > 0);
            let fp32 = at.iter().all(|r| r.bits.is_fp32());
            assert!(gated != fp32, "layer {layer}: {at:?}");
            // stem, 1×1 projection shortcuts and classifier stay fp32
            let role = roles[layer as usize];
            assert_eq!(
                fp32,
                role != cptsim_models::LayerRole::Body,
                "layer {layer}"
            );
        }
    }
    let d = dfq(&tr);
    assert_eq!(d.state.cp.len(), 3);
    assert!((0..3).all(|t| d.target_at(t) == 3.0));
    assert!(
        d.state.confidence.iter().all(|&c| c > 0.2 && c <= 1.0),
        "{:?}",
        d.state.confidence
    );
    assert!(d.state.cp.iter().all(|&c| (1.75..=4.7).contains(&c)));
    assert!((d.achieved() - d.state.cp[2]).abs() < 1e-12);

    // checkpoint after 2 iterations, resume, finish: identical to the uninterrupted run
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ck.bin");
    let mut part = trainer(&data, 3, false);
    part.step().unwrap();
    part.step().unwrap();
    checkpoint::save(&path, &mut part, serde_json::Value::Null).unwrap();
    let mut resumed = trainer(&data, 3, false);
    checkpoint::load(&path)
        .unwrap()
        .restore(&mut resumed)
        .unwrap();
    resumed.step().unwrap();
    assert_eq!(resumed.rows(), rows);
    assert_eq!(dfq(&resumed).state, d.state);
    assert_eq!(resumed.param_values(), tr.param_values());
}

#[test]
fn one_and_two_threads_give_the_same_run() {
    let data = data();
    let run = |threads: usize| {
        cptsim_testdata::with_threads(threads, || {
            let mut tr = trainer(&data, 2, false);
            while !tr.done() {
                tr.step().unwrap();
            }
            let params = tr.param_values();
            (tr.rows(), params)
        })
        .unwrap()
    };
    assert_eq!(run(1), run(2));
}

#[test]
fn cost_term_pushes_the_gate_towards_the_target() {
    // Far below a high target the sign is −1: the gate's cost gradient raises expensive
    // options, so cp rises over a few steps with a large β; far above a low target it falls.
    let data = data();
    for (target, rising) in [(20.0, true), (0.5, false)] {
        let mut tr = trainer(&data, 12, false);
        if let Some(d) = tr.policy_as_mut::<Dfq>() {
            d.config.target_cp = target;
            d.config.beta = 2.0;
        }
        while !tr.done() {
            tr.step().unwrap();
        }
        let cp = &dfq(&tr).state.cp;
        let (first, last) = (cp[0], cp[cp.len() - 1]);
        assert!(
            if rising { last > first } else { last < first },
            "target {target}: {cp:?}"
        );
    }
}

#[test]
fn fractrain_steps_the_target_at_turning_points() {
    let data = data();
    // ε = 10 with α = 1: every fifth check is a plateau.
    let mut tr = trainer(&data, 10, true);
    assert_eq!(dfq(&tr).target(), 1.5);
    while !tr.done() {
        tr.step().unwrap();
    }
    let d = dfq(&tr);
    assert_eq!(
        d.state.pfq.as_ref().map(|p| p.turns.clone()),
        Some(vec![5, 10])
    );
    assert_eq!(d.target(), 2.5);
    // the turning point after iteration t raises the target from iteration t + 1 on
    let targets: Vec<f64> = (0..6).map(|t| d.target_at(t)).collect();
    assert_eq!(targets, [1.5, 1.5, 1.5, 1.5, 1.5, 2.0]);
    assert_eq!(d.target_at(9), 2.0);
    assert_eq!(d.target_at(10), 2.5);
}

#[test]
fn targets_outside_the_candidates_reach_are_found() {
    let mut cfg = DfqConfig::new(CandidateSet::Cifar, 4, 3.0);
    let (lo, hi) = cfg.cp_range();
    assert!((lo - 1.7578125).abs() < 1e-9 && (hi - 4.6875).abs() < 1e-9);
    assert!(cfg.unreachable_targets().is_empty());
    cfg.target_cp = 1.5;
    cfg.fractrain = Some(fractrain_steps(0.05, 0.3));
    assert_eq!(cfg.unreachable_targets(), vec![1.5]);
    cfg.target_cp = 1.8;
    assert!(cfg.unreachable_targets().is_empty());
}

#[test]
fn bad_settings_are_rejected() {
    assert!(DfqConfig::new(CandidateSet::Cifar, 1, 3.0)
        .validate()
        .is_err());
    assert!(DfqConfig::new(CandidateSet::Cifar, 4, 0.0)
        .validate()
        .is_err());
    assert!(DfqConfig::new(CandidateSet::Imagenet, 6, 3.0)
        .validate()
        .is_ok());
}

/// Test helper: checks every `stride`-th entry of each parameter's stored gradient against a
/// central finite difference (step 1e-2) of `loss`; returns how many entries were checked.
pub(crate) fn check_param_grads<T>(
    model: &mut T,
    params: fn(&mut T) -> Vec<&mut cptsim_nn::layers::Param>,
    loss: impl Fn(&mut T) -> f64,
    stride: usize,
    rel_tol: f64,
) -> usize {
    let eps = 1e-2f32;
    let mut checked = 0;
    for p in 0..params(model).len() {
        let n = params(model)[p].value.len();
        for j in (0..n).step_by(stride) {
            let analytic = params(model)[p]
                .grad
                .iter()
                .nth(j)
                .copied()
                .unwrap_or(f32::NAN);
            let nudge = |m: &mut T, d: f32| {
                if let Some(v) = params(m)[p].value.iter_mut().nth(j) {
                    *v += d;
                }
            };
            nudge(model, eps);
            let up = loss(model);
            nudge(model, -2.0 * eps);
            let down = loss(model);
            nudge(model, eps);
            let numeric = (up - down) / (2.0 * f64::from(eps));
            let analytic = f64::from(analytic);
            assert!(
                (analytic - numeric).abs() <= 3e-4 + rel_tol * numeric.abs().max(analytic.abs()),
                "param {p}[{j}]: analytic {analytic} vs numeric {numeric}"
            );
            checked += 1;
        }
    }
    checked
}
