//! The server process's CPU time and peak resident memory, from /proc.

use std::time::Duration;

/// Clock ticks per second of `/proc/<pid>/stat` times (`sysconf(_SC_CLK_TCK)`,
/// 100 on every Linux this runs on).
const CLOCK_TICKS_PER_SECOND: f64 = 100.0;

/// What the kernel says of one process at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// User plus system CPU time.
    pub cpu: Duration,
    /// Resident set size now, bytes.
    pub rss: u64,
    /// Peak resident set size since the start or the last [`reset_peak`].
    pub peak_rss: u64,
}

/// Reads `/proc/<pid>/stat` and `/proc/<pid>/status`.
pub fn sample(pid: u32) -> Result<Sample, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|error| format!("/proc/{pid}/stat: {error}"))?;
    // The command name may hold spaces; the fields after it are plain.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15; `fields` starts at field 3.
    let ticks = |index: usize| -> Result<f64, String> {
        fields
            .get(index - 3)
            .and_then(|field| field.parse::<f64>().ok())
            .ok_or_else(|| format!("/proc/{pid}/stat: no field {index}"))
    };
    let cpu = Duration::from_secs_f64((ticks(14)? + ticks(15)?) / CLOCK_TICKS_PER_SECOND);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|error| format!("/proc/{pid}/status: {error}"))?;
    let kib = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    Ok(Sample {
        cpu,
        rss: kib("VmRSS:") * 1024,
        peak_rss: kib("VmHWM:") * 1024,
    })
}

/// Resets the process's peak RSS to its current RSS (`clear_refs` 5), so the
/// next [`sample`] reports the peak of one workload. Returns whether the
/// kernel allowed it; otherwise the peak covers the process's whole life.
pub fn reset_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}
