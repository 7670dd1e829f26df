//! The library settings a [`TrainPlan`]'s keys make: the schedule request, the PFQ, PRT, DFQ and
//! LDP configurations and the trainer's [`TrainConfig`]. Both [`TrainPlan::validate`] (checking
//! them) and [`crate::Run`] (building the run from them) take them from here.

use cptsim_nn::optim::{LrPolicy, LrSchedule};
use cptsim_traces::schedule::{BitRange, ScheduleArgs};

use super::{CandidatesKind, EvalBitsKind, LrKind, MappingKind, PolicyKind, TrainPlan};
use crate::policy::dfq::{CandidateSet, DfqConfig, FracTrainConfig};
use crate::policy::ldp::{BitMap, LdpConfig, Mapping};
use crate::{EvalBits, PfqConfig, PrtConfig, TrainConfig};

/// Images per evaluation batch.
const EVAL_BATCH: usize = 500;

impl TrainPlan {
    /// The schedule request of a run of `iterations` (a `schedule` other than `pfq`).
    pub fn schedule_args(&self, iterations: u64) -> ScheduleArgs {
        ScheduleArgs::new(self.schedule.as_str(), iterations)
            .cycles(self.cycles)
            .bits(self.bits.bit_range())
            .grad_bits(self.grad_bits.bit_range())
            .convention(self.convention.rule())
    }

    /// PFQ's stage lists and indicator constants (`schedule = "pfq"`).
    pub fn pfq_config(&self) -> PfqConfig {
        PfqConfig {
            fw: self.pfq_fw.0.clone(),
            bw: self.pfq_bw.0.clone(),
            epsilon: self.pfq_eps,
            alpha: self.pfq_alpha,
        }
    }

    /// The Precision Range Test's settings, when `prt` is on.
    pub fn prt_config(&self) -> Option<PrtConfig> {
        self.prt.then(|| PrtConfig {
            start_bits: self.prt_start_bits,
            max_bits: self.bits.max,
            iters_per_step: self.prt_iters_per_step,
            window: self.prt_window,
            threshold_pp: self.prt_threshold,
        })
    }

    /// DFQ's settings (FracTrain's target stepping with `policy = "fractrain"`); the cp target
    /// defaults to 3 % for DFQ and the initial 1.5 % for FracTrain.
    pub fn dfq_config(&self) -> DfqConfig {
        let fractrain = self.policy == PolicyKind::Fractrain;
        let target = self.target_cp.unwrap_or(if fractrain { 1.5 } else { 3.0 });
        let set = match self.candidates {
            CandidatesKind::Cifar => CandidateSet::Cifar,
            CandidatesKind::Imagenet => CandidateSet::Imagenet,
        };
        let mut cfg = DfqConfig::new(set, self.weight_bits, target);
        cfg.beta = self.dfq_beta;
        cfg.relax = self.dfq_relax;
        if fractrain {
            cfg.fractrain = Some(FracTrainConfig {
                cp_step: self.cp_step,
                turns: self.cp_turns,
                epsilon: self.pfq_eps,
                alpha: self.pfq_alpha,
            });
        }
        cfg
    }

    /// LDP's settings over `bits`, backward at the top of `grad_bits`.
    pub fn ldp_config(&self) -> cptsim_nn::Result<LdpConfig> {
        let mapping = match self.ldp_mapping {
            MappingKind::Scaled => Mapping::Scaled,
            MappingKind::Offset => Mapping::Offset,
        };
        let map = BitMap::new(mapping, self.bits.min, self.bits.max)?;
        let defaults = LdpConfig::new(map, self.grad_bits.max);
        Ok(LdpConfig {
            init_bits: self.ldp_init_bits.unwrap_or(defaults.init_bits),
            target: self.target,
            lr: self.ldp_lr,
            alpha: self.ldp_alpha,
            eps: self.ldp_eps,
            momentum: self.ldp_momentum,
            weight_decay: self.ldp_weight_decay,
            clip: !self.ldp_no_clip,
            ..defaults
        })
    }

    /// The trainer's settings for a run of `iterations` whose static baseline is `fw`/`bw`.
    pub fn train_config(&self, iterations: u64, fw: BitRange, bw: BitRange) -> TrainConfig {
        // W&K's critical-period probe drops the rate at 50 % and 75 % of the part after the deficit.
        let deficit = cptsim_traces::schedule::deficit_of(&self.schedule).unwrap_or(0);
        let after = iterations.saturating_sub(deficit);
        let schedule = match self.lr_schedule {
            LrKind::Constant => LrSchedule::Constant,
            LrKind::Cosine => LrSchedule::Cosine {
                total: iterations,
                min_lr: 0.0,
            },
            // The CIFAR recipe's drops at 32 000 and 48 000 of 64 000 iterations, scaled to the run.
            LrKind::Paper => LrSchedule::MultiStep {
                // ⌊3·after/4⌋ without overflowing 3·after.
                milestones: vec![
                    deficit + after / 2,
                    deficit + after / 4 * 3 + after % 4 * 3 / 4,
                ],
                gamma: 0.1,
            },
        };
        TrainConfig {
            iterations,
            batch: self.batch,
            lr: LrPolicy {
                base_lr: self.lr,
                schedule,
                warmup: self.warmup,
            },
            momentum: self.momentum,
            weight_decay: self.weight_decay,
            clip_grad: self.clip_grad,
            seed: self.seed,
            eval_every: self.eval_every,
            check_every: self.pfq_check_every,
            eval_batch: EVAL_BATCH,
            augment: !self.no_augment,
            max_loss: self.max_loss,
            quantize: self.quantizer.method().is_some(),
            eval_bits: match self.eval_bits {
                EvalBitsKind::Current => EvalBits::Current,
                EvalBitsKind::Max => EvalBits::Fixed {
                    fw: fw.max,
                    bw: bw.max,
                },
                EvalBitsKind::Fp32 => EvalBits::Fp32,
            },
        }
    }
}
