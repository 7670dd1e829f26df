//! The Slurm executor: one job array (`sbatch --array=INDICES%MAX`) whose task `i` runs
//! `cptsim sweep cell DIR/slurm/plan-STAMP.toml --out DIR --index i` (the plan as submitted); then it polls `squeue` until the job
//! has left the queue (or returns the job id at once with `--no-wait`). DIR must be on a
//! filesystem every node mounts at the same path.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};

use super::{Executor, Finished};
use crate::cmd::sweep::cell::{write_file, Cell};
use crate::cmd::sweep::study::{Study, PLAN_COPY};

/// Runs cells as one Slurm job array.
#[derive(Debug)]
pub struct Slurm {
    sbatch: PathBuf,
    /// Array tasks run at once (`%MAX`).
    pub max_parallel: Option<usize>,
    /// `--slurm-arg` options, after the plan's `[slurm]` ones.
    pub extra: Vec<String>,
    /// CPUs per task when neither the plan nor `--slurm-arg` set them.
    pub threads: usize,
    /// Wait for the job to leave the queue.
    pub wait: bool,
}

/// `name` on `PATH`.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

impl Slurm {
    /// Finds `sbatch`; its absence is an error before anything is written.
    pub fn new(
        max_parallel: Option<usize>,
        extra: Vec<String>,
        threads: usize,
        wait: bool,
    ) -> anyhow::Result<Self> {
        let Some(sbatch) = find_on_path("sbatch") else {
            bail!(
                "--executor slurm: `sbatch` is not on PATH (is this a Slurm login node? \
                 install slurm-client, or use --executor local)"
            );
        };
        Ok(Self {
            sbatch,
            max_parallel,
            extra,
            threads: threads.max(1),
            wait,
        })
    }
}

/// Array indices as Slurm ranges: `0-3,7,9-10`.
pub fn index_ranges(indices: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < indices.len() {
        let start = indices[i];
        let mut end = start;
        while i + 1 < indices.len() && indices[i + 1] == end + 1 {
            i += 1;
            end = indices[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// `s` quoted for a POSIX shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn run_tool(cmd: &mut Command, what: &str) -> anyhow::Result<(bool, String, String)> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    ))
}

impl Slurm {
    /// Writes the task script and submits the array; returns the job id.
    fn submit(&self, study: &Study, pending: &[&Cell]) -> anyhow::Result<String> {
        let exe = std::env::current_exe().context("locating the cptsim binary")?;
        let slurm_dir = study.dir.join("slurm");
        std::fs::create_dir_all(&slurm_dir)
            .with_context(|| format!("creating {}", slurm_dir.display()))?;
        // Each submission freezes its own plan and script, so editing the plan (and rerunning)
        // while a job waits in the queue cannot shift the cells its array indices name.
        let stamp = format!(
            "{}-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            std::process::id()
        );
        let plan = slurm_dir.join(format!("plan-{stamp}.toml"));
        std::fs::copy(study.dir.join(PLAN_COPY), &plan)
            .with_context(|| format!("copying the plan to {}", plan.display()))?;
        let script = slurm_dir.join(format!("task-{stamp}.sh"));
        write_file(
            &script,
            &format!(
                "#!/bin/sh\n\
                 # Written by `cptsim sweep run --executor slurm`: array task i runs cell i.\n\
                 export RAYON_NUM_THREADS=\"${{SLURM_CPUS_PER_TASK:-1}}\"\n\
                 exec {} sweep cell {} --out {} --index \"$SLURM_ARRAY_TASK_ID\"\n",
                shell_quote(&exe.to_string_lossy()),
                shell_quote(&plan.to_string_lossy()),
                shell_quote(&study.dir.to_string_lossy()),
            ),
        )?;
        let indices: Vec<usize> = pending.iter().map(|c| c.index).collect();
        let max = self.max_parallel.unwrap_or(indices.len()).max(1);
        let cwd = std::env::current_dir().context("reading the working directory")?;
        let mut options: Vec<String> = vec![
            "--parsable".into(),
            format!("--job-name=cptsim-{}", study.plan.name),
            format!("--array={}%{max}", index_ranges(&indices)),
            format!("--output={}", slurm_dir.join("%A_%a.out").display()),
            format!("--chdir={}", cwd.display()),
        ];
        let user: Vec<&String> = study.plan.slurm.iter().chain(&self.extra).collect();
        let sets_cpus = user
            .iter()
            .any(|a| a.starts_with("--cpus-per-task") || a.starts_with("-c"));
        if !sets_cpus {
            options.push(format!("--cpus-per-task={}", self.threads));
        }
        options.extend(user.into_iter().cloned());
        let (ok, stdout, stderr) = run_tool(
            Command::new(&self.sbatch).args(&options).arg(&script),
            "sbatch",
        )?;
        if !ok {
            bail!("sbatch {} failed: {stderr}", options.join(" "));
        }
        let job = stdout.split(';').next().unwrap_or("").trim().to_string();
        if job.is_empty() || !job.chars().all(|c| c.is_ascii_digit()) {
            bail!("sbatch printed no job id (stdout: {stdout:?}, stderr: {stderr:?})");
        }
        Ok(job)
    }

    /// Polls `squeue` until the job has left the queue, reporting done cells as they appear.
    fn wait_for(&self, job: &str, pending: &[&Cell]) -> anyhow::Result<()> {
        let squeue = find_on_path("squeue")
            .with_context(|| format!("`squeue` is not on PATH: cannot follow job {job}"))?;
        let mut failures = 0;
        let mut reported = 0;
        loop {
            let (ok, stdout, stderr) = run_tool(
                Command::new(&squeue).args(["-h", "-j", job, "-o", "%i %T"]),
                "squeue",
            )?;
            let done = pending.iter().filter(|c| c.is_done()).count();
            if done != reported {
                eprintln!("job {job}: {done}/{} cells done", pending.len());
                reported = done;
            }
            if ok && stdout.is_empty() || stderr.contains("Invalid job id") {
                return Ok(());
            }
            if ok {
                failures = 0;
            } else {
                failures += 1;
                if failures >= 30 {
                    bail!(
                        "squeue keeps failing ({stderr}); job {job} may still run: follow it \
                         with `cptsim sweep status DIR`"
                    );
                }
            }
            std::thread::sleep(Duration::from_secs(2));
        }
    }
}

impl Executor for Slurm {
    fn execute(&self, study: &Study, pending: &[&Cell]) -> anyhow::Result<Finished> {
        let job = self.submit(study, pending)?;
        eprintln!(
            "submitted job {job}: {} array tasks, logs in {}",
            pending.len(),
            Path::new(&study.dir).join("slurm").display()
        );
        if !self.wait {
            return Ok(Finished::Submitted(job));
        }
        self.wait_for(&job, pending)?;
        Ok(Finished::Yes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_compress_runs() {
        assert_eq!(index_ranges(&[0, 1, 2, 3]), "0-3");
        assert_eq!(index_ranges(&[0, 2, 3, 4, 7, 9, 10]), "0,2-4,7,9-10");
        assert_eq!(index_ranges(&[5]), "5");
    }

    #[test]
    fn quotes_for_the_shell() {
        assert_eq!(shell_quote("/a b/it's"), r"'/a b/it'\''s'");
    }
}
