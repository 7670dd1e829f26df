//! Reading a stored plan of an older version: version 2 (checkpoints of cptsim before the flat
//! plan) nested the PFQ, PRT, DFQ and LDP keys, the scope and the length, and kept bit ranges as
//! `{min, max}`; [`upgrade`] rewrites it into the current keys.

use serde_json::{Map, Value};

/// Keys of a version-2 plan's groups and the keys they became.
const MOVED: [(&str, &str, &str); 26] = [
    ("pfq", "fw", "pfq_fw"),
    ("pfq", "bw", "pfq_bw"),
    ("pfq", "epsilon", "pfq_eps"),
    ("pfq", "alpha", "pfq_alpha"),
    ("pfq", "check_every", "pfq_check_every"),
    ("prt", "start_bits", "prt_start_bits"),
    ("prt", "iters_per_step", "prt_iters_per_step"),
    ("prt", "window", "prt_window"),
    ("prt", "threshold", "prt_threshold"),
    ("dfq", "target_cp", "target_cp"),
    ("dfq", "weight_bits", "weight_bits"),
    ("dfq", "candidates", "candidates"),
    ("dfq", "cp_step", "cp_step"),
    ("dfq", "cp_turns", "cp_turns"),
    ("dfq", "beta", "dfq_beta"),
    ("dfq", "relax", "dfq_relax"),
    ("dfq", "exec", "dfq_exec"),
    ("ldp", "target", "target"),
    ("ldp", "mapping", "ldp_mapping"),
    ("ldp", "init_bits", "ldp_init_bits"),
    ("ldp", "lr", "ldp_lr"),
    ("ldp", "alpha", "ldp_alpha"),
    ("ldp", "eps", "ldp_eps"),
    ("ldp", "momentum", "ldp_momentum"),
    ("ldp", "weight_decay", "ldp_weight_decay"),
    ("scope", "first", "quantize_first"),
];

/// The other scope roles.
const SCOPE: [(&str, &str); 3] = [
    ("last", "quantize_last"),
    ("shortcut", "quantize_shortcut"),
    ("depthwise", "quantize_depthwise"),
];

/// `{min, max}` as `MIN:MAX`.
fn range_text(v: &Value) -> Option<Value> {
    let (min, max) = (v.get("min")?.as_u64()?, v.get("max")?.as_u64()?);
    Some(Value::from(if min == max {
        min.to_string()
    } else {
        format!("{min}:{max}")
    }))
}

/// A version-2 plan as the current version's keys (no `version`); `Err` says what could not be read.
pub(crate) fn upgrade(mut plan: Map<String, Value>) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    let groups = ["pfq", "prt", "dfq", "ldp", "scope"];
    let taken: Vec<(String, Value)> = groups
        .iter()
        .filter_map(|g| plan.remove(*g).map(|v| (g.to_string(), v)))
        .collect();
    let group = |name: &str| taken.iter().find(|(g, _)| g == name).map(|(_, v)| v);
    for (g, key, new) in MOVED {
        if let Some(v) = group(g).and_then(|t| t.get(key)) {
            out.insert(new.into(), v.clone());
        }
    }
    for (key, new) in SCOPE {
        if let Some(v) = group("scope").and_then(|t| t.get(key)) {
            out.insert(new.into(), v.clone());
        }
    }
    let prt = group("prt").is_some_and(|p| !p.is_null());
    out.insert("prt".into(), Value::from(prt));
    if let Some(clip) = group("ldp")
        .and_then(|l| l.get("clip"))
        .and_then(Value::as_bool)
    {
        out.insert("ldp_no_clip".into(), Value::from(!clip));
    }
    for key in ["bits", "grad_bits"] {
        let v = plan.remove(key).ok_or(format!("no `{key}`"))?;
        out.insert(key.into(), range_text(&v).ok_or(format!("`{key}`: {v}"))?);
    }
    if let Some(Value::Array(fw_bw)) = plan.remove("depthwise_bits") {
        let text: Vec<String> = fw_bw.iter().map(Value::to_string).collect();
        out.insert("depthwise_bits".into(), Value::from(text.join("/")));
    }
    match plan.remove("length") {
        Some(Value::Object(l)) => {
            for (from, to) in [("iterations", "iters"), ("epochs", "epochs")] {
                if let Some(n) = l.get(from) {
                    out.insert(to.into(), n.clone());
                }
            }
        }
        other => return Err(format!("`length`: {other:?}")),
    }
    if let Some(a) = plan.remove("augment").and_then(|a| a.as_bool()) {
        out.insert("no_augment".into(), Value::from(!a));
    }
    plan.remove("version");
    out.extend(plan);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{MappingKind, Range, TrainPlan};

    #[test]
    fn a_version_2_plan_reads_as_the_same_run() {
        let v2 = serde_json::json!({
            "version": 2, "model": "zoo:lenet5", "data": "synthetic", "policy": "schedule",
            "schedule": "cosine", "bits": {"min": 3, "max": 8}, "grad_bits": {"min": 8, "max": 8},
            "cycles": 2, "convention": "cpt", "quantizer": "sbm",
            "scope": {"first": null, "last": true, "shortcut": null, "depthwise": null},
            "depthwise_bits": [8, 16], "length": {"iterations": 8}, "batch": 16, "lr": 0.05,
            "lr_schedule": "cosine", "warmup": 0, "momentum": 0.9, "weight_decay": 0.0001,
            "seed": 5, "init": "seed", "classes": null, "reinit_head": false, "subset": null,
            "val_split": 0.0, "eval_every": 4, "augment": false, "max_loss": 1000.0,
            "pfq": {"fw": [3, 4], "bw": [6, 8], "epsilon": 0.05, "alpha": 0.3, "check_every": 2},
            "prt": {"start_bits": 2, "iters_per_step": 60, "window": 10, "threshold": 4.0},
            "dfq": {"target_cp": null, "weight_bits": 4, "candidates": "cifar", "cp_step": 0.5,
                    "cp_turns": 3, "beta": 0.001, "relax": 0.0, "exec": "selected"},
            "ldp": {"target": 0.6, "mapping": "offset", "init_bits": null, "lr": 0.1,
                    "alpha": 1.0, "eps": 1e-8, "momentum": 0.0, "weight_decay": 0.0, "clip": false}
        });
        let serde_json::Value::Object(map) = v2 else {
            panic!("not an object")
        };
        let flat = upgrade(map).unwrap();
        let plan: TrainPlan = serde_json::from_value(Value::Object(flat)).unwrap();
        assert_eq!(
            (plan.bits, plan.iters, plan.batch),
            (Range::new(3, 8), Some(8), 16)
        );
        assert_eq!(plan.quantize_last, Some(true));
        assert_eq!(
            plan.depthwise_bits.map(|d| d.to_string()).as_deref(),
            Some("8/16")
        );
        assert!(plan.prt && plan.no_augment && plan.ldp_no_clip);
        assert_eq!(
            (plan.pfq_check_every, plan.ldp_mapping),
            (Some(2), MappingKind::Offset)
        );
        assert_eq!(plan.pfq_fw.0, vec![3, 4]);
    }
}
