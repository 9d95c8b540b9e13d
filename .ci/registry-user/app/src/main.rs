//! Calls the registry dependency's tuned kernel and checks it against a plain
//! triple loop.
fn main() {
    let (m, n, k) = (48, 64, 32);
    let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 13) as f32 / 13.0 - 0.5).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 11) as f32 / 11.0 - 0.5).collect();
    let c = ops_lib::gemm((&a[..], [m, k]), (&b[..], [k, n])).expect("shapes match");
    let mut worst = 0.0f32;
    for i in 0..m {
        for j in 0..n {
            let want: f32 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            worst = worst.max((c.data()[i * n + j] - want).abs());
        }
    }
    assert!(worst < 1e-4, "max error {worst}");
    println!("ok: max error {worst:e}");
}
