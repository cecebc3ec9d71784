//! The machine's facts for a bench's header (Linux: read from `/proc`).

use std::path::Path;

/// The CPUs this process may use.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// The CPU's model name, or `unknown CPU`.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The kernel's release, or `unknown`.
pub fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".into(), |v| v.trim().to_string())
}

/// The type of the file system `dir` is on, from `/proc/mounts`.
pub fn file_system(dir: &Path) -> Option<String> {
    let dir = dir.canonicalize().ok()?;
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (_, point, kind) = (fields.next()?, fields.next()?, fields.next()?);
            dir.starts_with(point)
                .then(|| (point.len(), kind.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, kind)| kind)
}
