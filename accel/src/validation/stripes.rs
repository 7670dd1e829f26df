//! Compute cycles of the Stripes group's own simulator (DNNsim) that cptsim reproduces, layer by
//! layer: every ungrouped conv and linear layer of seven zoo networks at batch 1, on DaDianNao
//! (16-bit activations) and on Stripes (the layer's activation bits). The reference numbers are data
//! ([`DATA`], `dnnsim_cycles.csv` beside this file, whose header says how they were produced);
//! cptsim's figure is the `compute_cycles` of the layer's forward GEMM costed on the built-in
//! `dadiannao` and `stripes` configurations, from the zoo model's own layer.

use cptsim_models::summary::LayerRole;

use super::{zoo_model, Row, Tolerance, ValidationError};
use crate::cost::accelerator::Accelerator;
use crate::workload::gemm::{training_gemm, GemmKind, OperandBits};

/// DNNsim's per-layer compute cycles (`network,layer,act_bits,dadiannao,stripes`, `#` comments).
pub const DATA: &str = include_str!("dnnsim_cycles.csv");

/// The group the rows are shown under.
pub const GROUP: &str = "Stripes/DaDianNao: DNNsim compute cycles";

/// Width of DaDianNao's bit-parallel operands, and of Stripes' weights.
const FULL_BITS: u32 = 16;

/// One layer's reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnnsimLayer {
    /// Zoo model name.
    pub network: String,
    /// The layer's name in the zoo model.
    pub layer: String,
    /// Activation bits Stripes ran the layer at.
    pub act_bits: u32,
    /// DaDianNao compute cycles per image.
    pub dadiannao: u64,
    /// Stripes compute cycles per image.
    pub stripes: u64,
}

/// The references in [`DATA`].
pub fn references() -> Result<Vec<DnnsimLayer>, ValidationError> {
    parse(DATA)
}

fn parse(text: &str) -> Result<Vec<DnnsimLayer>, ValidationError> {
    let mut out = Vec::new();
    let mut header = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let what = || format!("dnnsim_cycles.csv line {}", i + 1);
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if !header {
            if f != ["network", "layer", "act_bits", "dadiannao", "stripes"] {
                return Err(ValidationError::of(
                    what(),
                    format!("unexpected header `{line}`"),
                ));
            }
            header = true;
            continue;
        }
        let [network, layer, bits, dadn, str_] = f[..] else {
            return Err(ValidationError::of(
                what(),
                format!("{} fields, expected 5", f.len()),
            ));
        };
        let num = |s: &str, name: &str| {
            s.parse::<u64>()
                .map_err(|e| ValidationError::of(what(), format!("{name} `{s}`: {e}")))
        };
        let act_bits = num(bits, "act_bits")?;
        if !(1..=u64::from(FULL_BITS)).contains(&act_bits) {
            return Err(ValidationError::of(
                what(),
                format!("act_bits {act_bits}: DNNsim's Stripes runs 1 to {FULL_BITS} bits"),
            ));
        }
        out.push(DnnsimLayer {
            network: network.to_string(),
            layer: layer.to_string(),
            act_bits: act_bits as u32,
            dadiannao: num(dadn, "dadiannao")?,
            stripes: num(str_, "stripes")?,
        });
    }
    if !header {
        return Err(ValidationError::of("dnnsim_cycles.csv", "no header line"));
    }
    Ok(out)
}

/// The Stripes/DaDianNao rows: per reference layer, DaDianNao's then Stripes' cycles.
pub fn rows() -> Result<Vec<Row>, ValidationError> {
    let refs = references()?;
    let dadn = Accelerator::load("dadiannao").map_err(|e| ValidationError::of("dadiannao", e))?;
    let stripes = Accelerator::load("stripes").map_err(|e| ValidationError::of("stripes", e))?;
    let mut out = Vec::with_capacity(2 * refs.len());
    let mut model: Option<cptsim_models::ModelSummary> = None;
    for r in &refs {
        if model.as_ref().is_none_or(|m| m.name != r.network) {
            model = Some(zoo_model(&r.network, None)?);
        }
        let Some(m) = model.as_ref() else {
            continue;
        };
        let what = || format!("{} {}", r.network, r.layer);
        let layer =
            m.layers.iter().find(|l| l.name == r.layer).ok_or_else(|| {
                ValidationError::of(what(), "no such conv/linear layer in the zoo")
            })?;
        let problem = training_gemm(layer, GemmKind::Forward, 1)
            .ok_or_else(|| ValidationError::of(what(), "the layer has no forward GEMM"))?;
        let first = layer.role == LayerRole::First;
        let cycles = |acc: &Accelerator, stream: u32| -> Result<f64, ValidationError> {
            let bits = OperandBits {
                stream,
                stationary: FULL_BITS,
            };
            let c = acc
                .cost_problem(&problem, bits, first)
                .map_err(|e| ValidationError::of(format!("{} on {}", what(), acc.name()), e))?;
            Ok(c.timing.compute_cycles as f64)
        };
        out.push(Row {
            group: GROUP,
            model: what(),
            quantity: "DaDianNao cycles per image".into(),
            reference: r.dadiannao as f64,
            cptsim: cycles(&dadn, FULL_BITS)?,
            tolerance: Tolerance::Exact,
        });
        out.push(Row {
            group: GROUP,
            model: what(),
            quantity: format!("Stripes cycles per image, {}-bit activations", r.act_bits),
            reference: r.stripes as f64,
            cptsim: cycles(&stripes, r.act_bits)?,
            tolerance: Tolerance::Exact,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ungrouped conv and linear layer (DNNsim stops on AlexNet's two-tower convs).
    #[test]
    fn every_ungrouped_conv_and_linear_layer_of_each_network_has_a_reference() {
        let refs = references().unwrap();
        let mut nets: Vec<&str> = refs.iter().map(|r| r.network.as_str()).collect();
        nets.dedup();
        assert_eq!(nets.len(), 7, "{nets:?}");
        for net in nets {
            let m = zoo_model(net, None).unwrap();
            let names: Vec<&str> = refs
                .iter()
                .filter(|r| r.network == net)
                .map(|r| r.layer.as_str())
                .collect();
            let zoo: Vec<&str> = m
                .layers
                .iter()
                .filter(|l| l.groups <= 1)
                .map(|l| l.name.as_str())
                .collect();
            assert_eq!(names, zoo, "{net}");
            let grouped = m.layers.iter().filter(|l| l.groups > 1).count();
            assert_eq!(grouped, if net == "bf-alexnet" { 3 } else { 0 }, "{net}");
        }
    }

    /// The set-up's activation bits: the `bf-` models' stated bits, 8 for resnet20.
    #[test]
    fn act_bits_are_the_zoo_models_stated_activation_bits() {
        for r in references().unwrap() {
            let m = zoo_model(&r.network, None).unwrap();
            let at = m.layers.iter().position(|l| l.name == r.layer).unwrap();
            let want = match cptsim_models::zoo::bf_bits(&r.network) {
                Some(bits) => {
                    assert_eq!(bits.len(), m.layers.len(), "{}", r.network);
                    u32::from(bits[at].0)
                }
                None => 8,
            };
            assert_eq!(r.act_bits, want, "{} {}", r.network, r.layer);
        }
    }

    #[test]
    fn alexnet_conv1_is_the_space_to_depth_count() {
        // 3 → 96, 11×11 stride 4 on 227: DNNsim runs it as 48 channels with a 3×3 kernel,
        // 3025 windows · 9 · ⌈48/16⌉ = 81 675 DaDianNao cycles (not 3025 · 121 = 366 025)
        let r = references().unwrap();
        let c1 = r
            .iter()
            .find(|r| r.network == "bf-alexnet" && r.layer == "conv1")
            .unwrap();
        assert_eq!(c1.dadiannao, 81_675);
    }

    #[test]
    fn malformed_data_is_an_error_naming_the_line() {
        let head = "# c\nnetwork,layer,act_bits,dadiannao,stripes\n";
        let bad = [
            format!("{head}bf-lenet5,conv0,2,25600\n"),
            format!("{head}bf-lenet5,conv0,x,25600,3200\n"),
            format!("{head}bf-lenet5,conv0,17,25600,3200\n"),
            "bf-lenet5,conv0,2,25600,3200\n".to_string(),
            "# only comments\n".to_string(),
        ];
        for text in &bad {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains("dnnsim_cycles.csv"), "{e}");
        }
        assert_eq!(
            parse(&format!("{head}bf-lenet5,conv0,2,25600,3200\n"))
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn every_row_holds_exactly() {
        for r in rows().unwrap() {
            assert_eq!(r.passes(), Some(true), "{r:?}");
        }
    }
}
