//! The twelve conv layers C1–C12 of the AutoTVM paper's ResNet-18 table, each run
//! with the kernel the network uses for it (`--layers`), on random data.

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::net::LANES;
use crate::{ops, random};

pub struct Layer {
    pub name: &'static str,
    pub what: String,
    pub flop: f64,
    pub run: Box<dyn FnMut()>,
}

/// (name, C, H, K, kernel, stride); C7–C12 sit in stages 3 and 4, which run the
/// pre-blocked `*_kb` operators.
const TABLE: [(&str, usize, usize, usize, usize, usize); 12] = [
    ("C1", 3, 224, 64, 7, 2),
    ("C2", 64, 56, 64, 3, 1),
    ("C3", 64, 56, 64, 1, 1),
    ("C4", 64, 56, 128, 3, 2),
    ("C5", 64, 56, 128, 1, 2),
    ("C6", 128, 28, 128, 3, 1),
    ("C7", 128, 28, 256, 3, 2),
    ("C8", 128, 28, 256, 1, 2),
    ("C9", 256, 14, 256, 3, 1),
    ("C10", 256, 14, 512, 3, 2),
    ("C11", 256, 14, 512, 1, 2),
    ("C12", 512, 7, 512, 3, 1),
];

pub fn all() -> Vec<Layer> {
    let mut rng = StdRng::seed_from_u64(7);
    TABLE
        .iter()
        .enumerate()
        .map(|(i, &(name, c, h, k, r, st))| {
            let (o, kb, l) = (h / st, k / LANES, LANES);
            let blocked = i >= 6;
            let x = random(&mut rng, c * h * h);
            let w = random(&mut rng, k * c * r * r);
            let b = random(&mut rng, k);
            let mut y = vec![0.0f32; k * o * o];
            let (what, run): (&str, Box<dyn FnMut()>) = match (r, st, blocked) {
                (7, 2, _) => (
                    "conv7x7s2_relu",
                    Box::new(move || {
                        ops::conv7x7s2_relu_into(
                            (&x, [c, h, h]),
                            (&w, [k, c, 7, 7]),
                            (&b, [k]),
                            (&mut y, [k, o, o]),
                        )
                        .expect("shapes");
                    }),
                ),
                (3, 1, false) => (
                    "conv3x3_relu",
                    Box::new(move || {
                        ops::conv3x3_relu_into(
                            (&x, [c, h, h]),
                            (&w, [k, c, 3, 3]),
                            (&b, [k]),
                            (&mut y, [k, o, o]),
                        )
                        .expect("shapes");
                    }),
                ),
                (3, 2, false) => (
                    "conv3x3s2_relu",
                    Box::new(move || {
                        ops::conv3x3s2_relu_into(
                            (&x, [c, h, h]),
                            (&w, [k, c, 3, 3]),
                            (&b, [k]),
                            (&mut y, [k, o, o]),
                        )
                        .expect("shapes");
                    }),
                ),
                (1, 2, false) => (
                    "conv1x1s2_bias",
                    Box::new(move || {
                        ops::conv1x1s2_bias_into(
                            (&x, [c, h, h]),
                            (&w, [k, c]),
                            (&b, [k]),
                            (&mut y, [k, o, o]),
                        )
                        .expect("shapes");
                    }),
                ),
                (1, 1, _) => (
                    "conv1x1_bias",
                    Box::new(move || {
                        ops::conv1x1_bias_into(
                            (&x, [c, h, h]),
                            (&w, [k, c]),
                            (&b, [k]),
                            (&mut y, [k, o, o]),
                        )
                        .expect("shapes");
                    }),
                ),
                (3, 1, true) => (
                    "conv3x3_relu_kb",
                    Box::new(move || {
                        ops::conv3x3_relu_kb_into(
                            (&x, [c, h, h]),
                            (&w, [kb, c, 3, 3, l]),
                            (&b, [kb, l]),
                            (&mut y, [kb, l, o, o]),
                        )
                        .expect("shapes");
                    }),
                ),
                (3, 2, true) => (
                    "conv3x3s2_relu_kb",
                    Box::new(move || {
                        ops::conv3x3s2_relu_kb_into(
                            (&x, [c, h, h]),
                            (&w, [kb, c, 3, 3, l]),
                            (&b, [kb, l]),
                            (&mut y, [kb, l, o, o]),
                        )
                        .expect("shapes");
                    }),
                ),
                _ => (
                    "conv1x1s2_bias_kb",
                    Box::new(move || {
                        ops::conv1x1s2_bias_kb_into(
                            (&x, [c, h, h]),
                            (&w, [kb, c, l]),
                            (&b, [kb, l]),
                            (&mut y, [kb, l, o, o]),
                        )
                        .expect("shapes");
                    }),
                ),
            };
            Layer {
                name,
                what: format!("{what} C{c} {h}x{h} K{k}"),
                flop: 2.0 * (k * o * o * c * r * r) as f64,
                run,
            }
        })
        .collect()
}
