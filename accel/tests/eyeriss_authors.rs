//! cptsim's Eyeriss against the Bit Fusion authors' own Eyeriss results on their eight benchmarks
//! (hsharma35/bitfusion `results/eyeriss_results.csv`, batch 16, per image as their
//! `bitfusion-generate-graphs` notebook combines them: time = cycles / 500 MHz / 16, energy =
//! (ALU + RF + array + buffer + 0.15 × DRAM) × 3.2 pJ / 16, their pooling rows included; DRAM
//! words × 2 bytes without the pools). Reference data read off their files, nothing fitted to it.

use cptsim_accel::cost::inference::{cost_inference, geomean};
use cptsim_accel::Accelerator;

/// (benchmark, time ms, energy mJ, DRAM MB) per image.
const AUTHORS: [(&str, f64, f64, f64); 8] = [
    ("bf-alexnet", 8.7858, 12.834, 13.048),
    ("bf-svhn", 1.4121, 2.7888, 2.496),
    ("bf-cifar10", 5.5192, 10.702, 7.800),
    ("bf-lenet5", 0.13971, 0.30661, 0.432),
    ("bf-vgg7", 2.7032, 5.7029, 4.679),
    ("bf-resnet18", 11.936, 19.646, 18.468),
    ("bf-rnn", 0.13107, 0.40402, 2.122),
    ("bf-lstm", 0.10260, 0.32284, 1.649),
];

/// cptsim's (time ms, energy mJ, DRAM MB) per image of each benchmark on `accel`.
fn costs(accel: &str) -> Vec<(f64, f64, f64)> {
    let acc = Accelerator::load(accel).unwrap();
    AUTHORS
        .iter()
        .map(|(name, ..)| {
            let proto = cptsim_models::zoo::build(name, None, 0).unwrap();
            let model = cptsim_models::onnx::import_proto(&proto, name, 1)
                .unwrap()
                .summary();
            let bits = cptsim_models::zoo::bf_bits(name).unwrap();
            let c = cost_inference(&model, &bits, 16, &acc).unwrap();
            (
                c.latency_per_image_s() * 1e3,
                c.energy_per_image_j() * 1e3,
                c.totals.dram_bytes / 16.0 / 1e6,
            )
        })
        .collect()
}

#[test]
fn eyeriss_follows_the_authors_eyeriss() {
    let chip = costs("eyeriss");
    let big = costs("eyeriss-256pe");
    // energy and DRAM, measured: energy 0.95–1.06×; DRAM 0.91–1.17× on 12×14 PEs, 0.79–1.11× on
    // 16×16 (under the shared tiler the chip's energy was 1.25–1.72× and its DRAM up to 8.1×)
    for (accel, c) in [("eyeriss", &chip), ("eyeriss-256pe", &big)] {
        for ((name, _, mj, mb), (_, e, d)) in AUTHORS.iter().zip(c) {
            println!("{accel} {name}: energy {:.3}, DRAM {:.3}", e / mj, d / mb);
            assert!(
                (0.9..1.1).contains(&(e / mj)),
                "{accel} {name}: {e} mJ vs {mj}"
            );
            assert!(
                (0.75..1.25).contains(&(d / mb)),
                "{accel} {name}: {d} MB vs {mb}"
            );
        }
    }
    // time, measured: on 16×16 PEs geomean 1.00× (0.74–1.35× per benchmark); the chip's 12×14
    // is slower on every benchmark (geomean 1.41×)
    let ratio: Vec<f64> = AUTHORS.iter().zip(&big).map(|(a, c)| c.0 / a.1).collect();
    let g = geomean(&ratio).unwrap();
    println!("eyeriss-256pe time / authors' {g:.3} ({ratio:.2?})");
    assert!((0.9..1.1).contains(&g), "{g}");
    for ((name, ..), (b, c)) in AUTHORS.iter().zip(big.iter().zip(&chip)) {
        assert!(c.0 > b.0, "{name}: 12×14 {} ms vs 16×16 {} ms", c.0, b.0);
    }
}
