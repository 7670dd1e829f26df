//! Resuming: a checkpoint's plan decides the run, so keys given again with `--resume` must leave
//! it as it is ([`TrainPlan::check_resume`]); and paths are stored absolute
//! ([`TrainPlan::with_absolute_paths`]) so a run resumed from another directory finds its files.

use std::path::Path;

use super::{flag, to_json, PlanError, TrainPlan, INVOCATION_KEYS};

/// `path` made absolute against the working directory (not resolving links).
fn absolute(key: &str, path: &str) -> Result<String, PlanError> {
    let abs = std::path::absolute(path)
        .map_err(|e| PlanError::new(key, format!("{} {path}: {e}", flag(key))))?;
    abs.into_os_string().into_string().map_err(|p| {
        PlanError::new(
            key,
            format!("{}: path {} is not UTF-8", flag(key), p.to_string_lossy()),
        )
    })
}

impl TrainPlan {
    /// The plan with a model file and the data's path made absolute (`zoo:NAME` and
    /// `synthetic` as they are).
    pub fn with_absolute_paths(&self) -> Result<TrainPlan, PlanError> {
        let mut plan = self.clone();
        if !plan.model.starts_with("zoo:") && !plan.model.is_empty() {
            plan.model = absolute("model", &plan.model)?;
        }
        if let Some((kind, path)) = plan.data.split_once(':').filter(|(_, p)| !p.is_empty()) {
            plan.data = format!("{kind}:{}", absolute("data", path)?);
        }
        Ok(plan)
    }

    /// Checks the keys `given` with a resumed run (`request`'s values) against this plan, the
    /// checkpoint's in `dir`: together they must make a valid plan, and each must leave this one
    /// as it is. Keys of [`INVOCATION_KEYS`] may change.
    pub fn check_resume(
        &self,
        request: &TrainPlan,
        given: &[&str],
        dir: &Path,
    ) -> Result<(), PlanError> {
        let given: Vec<&str> = given
            .iter()
            .copied()
            .filter(|k| !INVOCATION_KEYS.contains(k))
            .collect();
        if given.is_empty() {
            return Ok(());
        }
        let dir = dir.display();
        let theirs = to_json(&request.with_absolute_paths()?);
        let mine = to_json(self);
        let mut merged = mine.clone();
        // The length is one choice of two keys: either given takes both.
        let length = ["iters", "epochs"];
        let takes = |k: &str| {
            given.contains(&k) || length.contains(&k) && length.iter().any(|l| given.contains(l))
        };
        for (key, v) in &theirs {
            if takes(key) {
                merged.insert(key.clone(), v.clone());
            }
        }
        let with_them: TrainPlan = serde_json::from_value(serde_json::Value::Object(merged))
            .map_err(|e| PlanError::new(given[0], format!("--resume {dir}: {e}")))?;
        with_them.validate().map_err(|e| {
            PlanError::new(
                &e.key,
                format!("--resume {dir}: the flags given with it: {e}"),
            )
        })?;
        for key in given {
            let (Some(new), Some(old)) = (theirs.get(key), mine.get(key)) else {
                continue;
            };
            if new != old {
                let flag = flag(key);
                return Err(PlanError::new(
                    key,
                    format!(
                        "--resume {dir}: {flag} gives {key} = {new}, but the checkpoint's run has \
                         {old}; a resumed run keeps its plan (drop {flag}, or start a new run; only \
                         --out, --stop-at, --checkpoint-minutes, --threads and --format may change \
                         on resume)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_keys_must_agree_with_the_checkpoint() {
        let saved = TrainPlan {
            model: "zoo:lenet5".into(),
            data: "synthetic".into(),
            lr: 0.05,
            iters: Some(8),
            ..TrainPlan::default()
        };
        let dir = Path::new("/runs/a");
        let mut request = TrainPlan {
            lr: 0.05,
            stop_at: Some(4),
            ..TrainPlan::default()
        };
        assert_eq!(
            saved.check_resume(&request, &["lr", "stop_at"], dir),
            Ok(())
        );
        request.lr = 0.1;
        let e = saved.check_resume(&request, &["lr"], dir).unwrap_err();
        assert_eq!(e.key, "lr");
        assert!(e.message.contains("--lr gives lr = 0.1"), "{e}");
        assert!(e.message.contains("has 0.05"), "{e}");
        request.epochs = Some(1);
        let e = saved.check_resume(&request, &["epochs"], dir).unwrap_err();
        assert!(e.message.contains("--epochs gives epochs = 1"), "{e}");
        request.lr = 0.05;
        request.momentum = 2.0;
        let e = saved
            .check_resume(&request, &["momentum"], dir)
            .unwrap_err();
        assert!(
            e.message.contains("the flags given with it: --momentum 2"),
            "{e}"
        );
    }
}
