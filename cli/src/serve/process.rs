//! The process's own resources, for `/metrics` under the standard Prometheus names
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_open_fds`, …):
//! read from `/proc/self` when scraped, so they cost nothing between scrapes.
//!
//! Linux only: where `/proc/self` cannot be read, [`sample`] gives `None` and the metrics are
//! left out rather than reported as zero.

use std::fs;

/// Clock ticks per second in `/proc` times (`USER_HZ`): 100 on every Linux architecture
/// Rust targets, whatever the kernel's own `HZ`; Prometheus's procfs reader assumes the same.
/// (`sysconf(_SC_CLK_TCK)` would need `unsafe` and a libc binding for one constant.)
const USER_HZ: f64 = 100.0;

/// One reading of the process's resources.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// User and system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Resident memory (`VmRSS`), in bytes.
    pub resident_bytes: u64,
    /// Virtual memory size, in bytes.
    pub virtual_bytes: u64,
    /// File descriptors open now.
    pub open_fds: u64,
    /// The soft limit on open file descriptors (`None` when unlimited).
    pub max_fds: Option<u64>,
    /// When the process started, in Unix seconds.
    pub start_time_seconds: f64,
}

/// Reads the process's resources from `/proc/self`, or `None` where that cannot be read.
pub fn sample() -> Option<Sample> {
    let stat = parse_stat(&fs::read_to_string("/proc/self/stat").ok()?)?;
    let resident_bytes = parse_vm_rss(&fs::read_to_string("/proc/self/status").ok()?)?;
    let boot_time = parse_boot_time(&fs::read_to_string("/proc/stat").ok()?)?;
    // The directory's own descriptor, open while it is read, is counted too (as Prometheus's
    // clients count it).
    let open_fds = fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    let max_fds = fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| parse_max_fds(&text));
    Some(Sample {
        cpu_seconds: (stat.utime + stat.stime) as f64 / USER_HZ,
        resident_bytes,
        virtual_bytes: stat.vsize,
        open_fds,
        max_fds,
        start_time_seconds: boot_time as f64 + stat.starttime as f64 / USER_HZ,
    })
}

/// The fields of `/proc/self/stat` used here (proc(5)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stat {
    /// Field 14, user time in clock ticks.
    utime: u64,
    /// Field 15, system time in clock ticks.
    stime: u64,
    /// Field 22, start time in clock ticks after boot.
    starttime: u64,
    /// Field 23, virtual memory size in bytes.
    vsize: u64,
}

/// Reads `/proc/self/stat`. The command name (field 2) is in parentheses and may itself hold
/// spaces and parentheses, so the fields are counted from the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    // Field 3 (the state) is the first after the name.
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        utime: field(14)?,
        stime: field(15)?,
        starttime: field(22)?,
        vsize: field(23)?,
    })
}

/// `VmRSS:   5412 kB` in `/proc/self/status`, in bytes.
fn parse_vm_rss(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kib = line.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
    kib.checked_mul(1024)
}

/// `btime 1764140309` in `/proc/stat`: the boot time in Unix seconds.
fn parse_boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// The soft limit of `Max open files` in `/proc/self/limits`; `None` when unlimited.
fn parse_max_fds(text: &str) -> Option<u64> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    line.split_ascii_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        // A command name with a space and a parenthesis, as a process may name itself.
        let text = "4242 (mono flake) x) S 1 4242 4242 0 -1 4194560 1200 0 0 0 \
                    250 75 0 0 20 0 3 0 98765 123456789 1500 18446744073709551615 \
                    1 1 0 0 0 0 0 4096 17479 0 0 0 17 1 0 0 0 0 0\n";
        assert_eq!(
            parse_stat(text),
            Some(Stat {
                utime: 250,
                stime: 75,
                starttime: 98765,
                vsize: 123_456_789,
            })
        );
        assert_eq!(parse_stat("4242 (cut short) S 1 2"), None);
    }

    #[test]
    fn status_limits_and_boot_time_are_read_by_name() {
        let status = "Name:\tmonoflake\nVmPeak:\t  9000 kB\nVmRSS:\t    5412 kB\nThreads:\t3\n";
        assert_eq!(parse_vm_rss(status), Some(5412 * 1024));
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(parse_max_fds(limits), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_max_fds(unlimited), None);
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nbtime 1764140309\nprocesses 99\n"),
            Some(1_764_140_309)
        );
    }

    #[test]
    fn this_process_is_sampled_on_linux() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let s = sample().expect("/proc/self on Linux");
        assert!(
            s.resident_bytes > 0 && s.virtual_bytes >= s.resident_bytes,
            "{s:?}"
        );
        // Standard input, output and error, and the directory being read.
        assert!(s.open_fds >= 3, "{s:?}");
        assert!(s.start_time_seconds > 1_600_000_000.0, "{s:?}");
    }
}
