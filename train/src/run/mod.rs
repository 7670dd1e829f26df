//! A training run as a library call: [`Run::new`] loads the model, data and precision policy a
//! [`TrainPlan`] names (or [`Run::resume`] a [`SavedRun`]), and [`Run::execute`] trains, writing
//! the outputs into the plan's `out` — `metrics.csv`, `trace.pb`/`trace.csv`, `checkpoint.bin` at
//! every evaluation and every `checkpoint_minutes`, `summary.json` at the end — while an
//! [`Observer`] hears the progress and may stop it. A run whose `out` holds an earlier run's
//! outputs writes into a staging directory renamed into place when it finishes, so a run that
//! fails or is stopped leaves those outputs as they were.

mod drive;
mod error;
mod load;
mod lsuv;
mod observer;
mod outputs;
mod policies;
mod saved;
mod spike;

use std::path::{Path, PathBuf};

use anyhow::Context;
use cptsim_models::atomic::Staged;
use cptsim_models::ModelSummary;
use cptsim_nn::build::{build_network, BuildOptions, Init};
use cptsim_nn::collapse::CollapseDetector;
use cptsim_nn::data::text::TextData;
use cptsim_nn::quant::QuantMethod;
use cptsim_traces::schedule::BitRange;
use cptsim_traces::{Bits, TraceRow};

use crate::checkpoint::Checkpoint;
use crate::feed::TokenData;
use crate::plan::{InitKind, TrainPlan, INVOCATION_KEYS};
use crate::{EvalRecord, TrainData, TrainNet};
pub use error::{ErrorKind, RunError};
pub use load::DATA_KINDS;
pub use observer::{Checkpointed, Notice, Observer, Outputs, Progress, Silent, Start};
pub use outputs::{has_outputs, Summary, CHECKPOINT, FILES};
use policies::SendPolicy;
pub use saved::SavedRun;

/// Stack of the threads of a run's own pool (`threads`): a main thread's default size.
const STACK: usize = 8 << 20;

/// A run set up and ready to train.
pub struct Run {
    plan: TrainPlan,
    seconds_before: f64,
    resume: Option<Checkpoint>,
    model: ModelSummary,
    net: TrainNet,
    policy: SendPolicy,
    inputs: Inputs,
    iterations: u64,
    baseline: (BitRange, BitRange),
    collapse: CollapseDetector,
    notices: Vec<Notice>,
    out: Out,
}

/// The training data.
enum Inputs {
    Images(TrainData),
    Text(TextData),
    Tokens(TokenData),
}

/// Where a run writes: nowhere, its `out` itself, or a staging directory renamed into `out` at
/// the end (when `out` holds outputs of a run this one does not continue).
struct Out {
    target: Option<PathBuf>,
    work: Option<PathBuf>,
    staged: Staged,
}

impl Out {
    fn new(target: Option<&Path>, resumed_from: Option<&Path>) -> anyhow::Result<Self> {
        let mut staged = Staged::new();
        let work = match target {
            Some(dir) if resumed_from != Some(dir) && has_outputs(dir) => {
                Some(staged.dir(dir, &FILES).context("--out")?)
            }
            Some(dir) => {
                std::fs::create_dir_all(dir).with_context(|| format!("--out {}", dir.display()))?;
                Some(dir.to_path_buf())
            }
            None => None,
        };
        Ok(Self {
            target: target.map(Path::to_path_buf),
            work,
            staged,
        })
    }

    /// Whether it writes straight into `out` (so a stop keeps a checkpoint).
    fn in_place(&self) -> bool {
        self.work.is_some() && self.work == self.target
    }

    fn is_staged(&self) -> bool {
        self.work != self.target
    }

    /// `out` as messages say it (`DIR` without one).
    fn shown(&self) -> String {
        self.target
            .as_deref()
            .map_or("DIR".into(), |d| d.display().to_string())
    }
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// The summary (`summary.json`); `None` when `stop_at` ended the run before its end.
    pub summary: Option<Summary>,
    /// Iterations done.
    pub iteration: u64,
    /// Iterations of the whole run.
    pub iterations: u64,
    /// Every evaluation (`metrics.csv`).
    pub evals: Vec<EvalRecord>,
    /// The trace.
    pub trace: Vec<TraceRow>,
    /// The output directory, if the plan has one.
    pub out: Option<PathBuf>,
    /// The static baseline's bits (forward and backward at the tops of their ranges).
    pub baseline: Bits,
}

impl RunResult {
    /// `trace.pb` in the output directory.
    pub fn trace_path(&self) -> Option<PathBuf> {
        self.out.as_ref().map(|d| d.join("trace.pb"))
    }
}

impl Run {
    /// Validates `plan`, creates its output directory and loads its model, data and policy.
    pub fn new(plan: &TrainPlan) -> Result<Self, RunError> {
        plan.validate()?;
        let plan = plan.with_absolute_paths()?;
        Ok(Self::set_up(plan, None, 0.0, None)?)
    }

    /// Sets up the run checkpointed in `saved` to continue where it stopped; only the invocation
    /// keys of `saved.plan` may differ from the checkpoint's.
    pub fn resume(saved: SavedRun) -> Result<Self, RunError> {
        let SavedRun {
            plan: asked,
            dir,
            seconds,
            stored,
            checkpoint,
        } = saved;
        let (mut mine, theirs) = (stored.to_json(), asked.to_json());
        for key in INVOCATION_KEYS {
            if let Some(v) = theirs.get(key) {
                mine.insert(key.into(), v.clone());
            }
        }
        if let Some(key) = TrainPlan::keys()
            .into_iter()
            .find(|k| mine.get(k) != theirs.get(k))
        {
            return Err(crate::plan::PlanError::new(
                &key,
                format!(
                    "--resume {}: {} differs from the checkpoint's plan; a resumed run keeps it",
                    dir.display(),
                    crate::plan::flag(&key)
                ),
            )
            .into());
        }
        let mut plan = stored;
        plan.out = asked.out.or_else(|| Some(dir.clone()));
        plan.stop_at = asked.stop_at;
        plan.checkpoint_minutes = asked.checkpoint_minutes;
        plan.threads = asked.threads;
        plan.validate()?;
        Ok(Self::set_up(plan, Some(checkpoint), seconds, Some(&dir))?)
    }

    fn set_up(
        plan: TrainPlan,
        resume: Option<Checkpoint>,
        seconds_before: f64,
        resumed_from: Option<&Path>,
    ) -> anyhow::Result<Self> {
        let out = Out::new(plan.out.as_deref(), resumed_from)?;
        let mut notices = Vec::new();
        let corpus = load::load_corpus(&plan)?;
        let graph = match &corpus {
            Some(c) => load::load_lm(&plan, c)?,
            None => load::load_model(&plan, &mut notices)?,
        };
        if graph.bn_folded {
            notices.push(Notice::Note(cptsim_models::onnx::BN_FOLDED_NOTE.into()));
        }
        let opts = BuildOptions {
            init: match plan.init {
                InitKind::Seed | InitKind::Lsuv => Init::Seeded(plan.seed),
                InitKind::Model => Init::FromModel,
            },
            method: plan.quantizer.method().unwrap_or(QuantMethod::Sbm),
            noise_seed: plan.seed,
            scope: plan.scope(),
        };
        let model_spec = || format!("--model {}", plan.model);
        let mut network = build_network(&graph, &opts).with_context(model_spec)?;
        network.use_arithmetic(plan.arith()?);
        let model = network.summary().clone();
        let mut net = TrainNet::from_network(network).with_context(model_spec)?;
        load::fix_depthwise(&plan, &model, &mut net, &mut notices);
        let gate = policies::dfq_gate(&plan, &graph, &opts, &model, &mut net, &mut notices)?;
        let inputs = match corpus {
            Some(c) => Inputs::Text(load::text_data(&plan, c, &net)?),
            None => match load::token_data(&plan, &graph, &net)? {
                Some(t) => Inputs::Tokens(t),
                None => {
                    let mut d = load::load_data(&plan, net.input, net.classes)?;
                    load::check_labels(&plan, &mut d, net.classes)?;
                    Inputs::Images(d)
                }
            },
        };
        if resume.is_none() {
            match plan.init {
                InitKind::Lsuv => lsuv::apply(&model, &mut net, &inputs, plan.batch, &mut notices),
                InitKind::Seed => lsuv::check_signal(
                    &model,
                    graph.has_normalization(),
                    &mut net,
                    &inputs,
                    plan.batch,
                    &mut notices,
                ),
                InitKind::Model => Ok(()),
            }
            .with_context(model_spec)?;
        }
        // An epoch of text is its whole windows.
        let train_len = match &inputs {
            Inputs::Text(t) => t.windows(&t.train) * plan.batch,
            Inputs::Images(d) => d.train.len(),
            Inputs::Tokens(t) => t.train.len(),
        };
        let iterations = load::iterations(&plan, train_len)?;
        let (policy, fw, bw) = policies::build(&plan, iterations, &net, &model, gate)?;
        let collapse = CollapseDetector::new(net.classes, CollapseDetector::DEFAULT_WINDOW)
            .with_context(model_spec)?;
        Ok(Self {
            plan,
            seconds_before,
            resume,
            model,
            net,
            policy,
            inputs,
            iterations,
            baseline: (fw, bw),
            collapse,
            notices,
            out,
        })
    }

    /// The plan (paths absolute; a resumed run's is the checkpoint's).
    pub fn plan(&self) -> &TrainPlan {
        &self.plan
    }

    /// Iterations of the whole run.
    pub fn iterations(&self) -> u64 {
        self.iterations
    }

    /// The model's conv/linear layers.
    pub fn model(&self) -> &ModelSummary {
        &self.model
    }

    /// Whether stopping the run keeps a checkpoint: it writes straight into its `out` (a new or
    /// resumed run), not into a staging directory (a run replacing earlier outputs, which a stop
    /// discards) or nowhere.
    pub fn checkpoints_on_stop(&self) -> bool {
        self.out.in_place()
    }

    /// Trains to the end (or to `stop_at`, or until `observer` stops it), writing the outputs;
    /// on `threads` threads of its own when the plan says so.
    pub fn execute(self, observer: &mut dyn Observer) -> Result<RunResult, RunError> {
        let Some(n) = self.plan.threads else {
            return self.drive(observer);
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .stack_size(STACK)
            .thread_name(|i| format!("cptsim-{i}"))
            .build()
            .map_err(|e| RunError::new(ErrorKind::Runtime, format!("--threads {n}: {e}")))?;
        pool.install(move || self.drive(observer))
    }
}
