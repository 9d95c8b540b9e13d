//! Tuning curves as SVG: the best GFLOP/s found after each trial, one line per
//! tuner and workload of a record log. Written by hand (a few lines of SVG)
//! rather than with a plotting crate, to keep the command light.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use autotune_tune::Record;

const W: f64 = 720.0;
const H: f64 = 420.0;
const LEFT: f64 = 60.0;
const BOTTOM: f64 = 40.0;
const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
];

/// Best-so-far curves per `(workload, tuner)`, in log order.
pub fn curves(records: &[Record]) -> BTreeMap<(String, String), Vec<f64>> {
    let mut out: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for r in records {
        let c = out
            .entry((r.workload.clone(), r.tuner.clone()))
            .or_default();
        let best = c
            .last()
            .copied()
            .unwrap_or(0.0)
            .max(r.gflops.unwrap_or(0.0));
        c.push(best);
    }
    out
}

/// An SVG with one polyline per curve, axes and a legend.
pub fn svg(title: &str, curves: &BTreeMap<(String, String), Vec<f64>>) -> String {
    let max_n = curves.values().map(Vec::len).max().unwrap_or(1).max(1) as f64;
    let max_g = curves
        .values()
        .flat_map(|c| c.iter().copied())
        .fold(1.0f64, f64::max)
        * 1.05;
    let x = |i: f64| LEFT + (W - LEFT - 20.0) * i / max_n;
    let y = |g: f64| (H - BOTTOM) - (H - BOTTOM - 30.0) * g / max_g;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{LEFT}\" y=\"18\" font-size=\"14\">{}</text>\n",
        escape(title)
    );
    let _ = writeln!(
        s,
        "<line x1=\"{LEFT}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n<line x1=\"{LEFT}\" y1=\"30\" x2=\"{LEFT}\" y2=\"{}\" stroke=\"black\"/>",
        H - BOTTOM,
        W - 20.0,
        H - BOTTOM,
        H - BOTTOM
    );
    for k in 0..=4 {
        let g = max_g * k as f64 / 4.0;
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{g:.0}</text>",
            LEFT - 6.0,
            y(g) + 4.0
        );
        let n = max_n * k as f64 / 4.0;
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{n:.0}</text>",
            x(n),
            H - BOTTOM + 16.0
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">trials</text>\n<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">best GFLOP/s</text>",
        (LEFT + W) / 2.0,
        H - 6.0,
        H / 2.0,
        H / 2.0
    );
    for (i, ((workload, tuner), c)) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<String> = c
            .iter()
            .enumerate()
            .map(|(n, g)| format!("{:.1},{:.1}", x(n as f64 + 1.0), y(*g)))
            .collect();
        let _ = writeln!(
            s,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
            points.join(" ")
        );
        let ly = 40.0 + 16.0 * i as f64;
        let _ = writeln!(
            s,
            "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"3\" fill=\"{color}\"/><text x=\"{}\" y=\"{}\">{} ({}), best {:.1}</text>",
            W - 330.0,
            ly - 4.0,
            W - 314.0,
            ly,
            escape(workload),
            escape(tuner),
            c.last().copied().unwrap_or(0.0)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(workload: &str, tuner: &str, g: Option<f64>) -> Record {
        Record {
            workload: workload.into(),
            workload_id: "mm:0000000000000000:1".parse().unwrap(),
            target: "x86_64-unknown-linux-gnu/avx512".parse().unwrap(),
            tuner: tuner.into(),
            config: Default::default(),
            gflops: g,
            seconds: None,
            error: None,
            time: 0,
            generator: None,
            threads: None,
            kernel: None,
            cpu: None,
        }
    }

    #[test]
    fn curves_keep_the_best_so_far() {
        let r = [
            rec("mm", "random", Some(2.0)),
            rec("mm", "random", None),
            rec("mm", "genetic", Some(1.0)),
            rec("mm", "random", Some(5.0)),
            rec("mm", "random", Some(3.0)),
        ];
        let c = curves(&r);
        assert_eq!(c[&("mm".into(), "random".into())], vec![2.0, 2.0, 5.0, 5.0]);
        assert_eq!(c[&("mm".into(), "genetic".into())], vec![1.0]);
        let s = svg("t", &c);
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains("mm (random), best 5.0"));
    }
}
