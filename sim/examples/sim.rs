//! Prints the simulation and, on stderr, the time per section:
//! `cargo run --release --example sim`.
fn main() -> std::io::Result<()> {
    let start = std::time::Instant::now();
    let stdout = std::io::stdout();
    let timings = hookbox_sim::run_timed(&mut stdout.lock(), &hookbox_sim::RunMeta::detect())?;
    for (section, elapsed) in timings {
        eprintln!("{section:<32} {:>9.3} ms", elapsed.as_secs_f64() * 1e3);
    }
    eprintln!(
        "{:<32} {:>9.3} ms",
        "total",
        start.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}
