//! What a benchmark ran on: numbers without their machine mean little.
//!
//! Read from `/proc` and `statfs`; anything unreadable is reported as
//! `"unknown"` rather than failing the run.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tembo_pmem::FlushInstruction;

/// The machine a report was measured on.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MachineInfo {
    /// CPU model (`model name` of `/proc/cpuinfo`).
    pub cpu_model: String,
    /// CPUs this process may run on.
    pub cpus: usize,
    /// Kernel release.
    pub kernel: String,
    /// Flush instructions this CPU executes, best first.
    pub flush_instructions: Vec<String>,
}

impl MachineInfo {
    /// Describes this machine.
    pub fn detect() -> MachineInfo {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        MachineInfo {
            cpu_model,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel,
            flush_instructions: FlushInstruction::ALL
                .into_iter()
                .filter(|i| i.is_available())
                .map(|i| i.name().to_string())
                .collect(),
        }
    }
}

/// The type of the filesystem holding `path` (`tmpfs`, `ext4`, …), or its
/// magic number in hex when the name is not known.
pub fn filesystem_of(path: &Path) -> String {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return "unknown".into();
    };
    // SAFETY: statfs is plain data, for which all-zero bytes are a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated string and `st` a valid out-pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return "unknown".into();
    }
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between targets
    let magic = st.f_type as i64 as u64 & 0xffff_ffff;
    match magic {
        0x0102_1994 => "tmpfs",
        0x8584_58f6 => "ramfs",
        0xef53 => "ext2/3/4",
        0x5846_5342 => "xfs",
        0x9123_683e => "btrfs",
        0x794c_7630 => "overlayfs",
        0x2fc1_2fc1 => "zfs",
        0xf2f5_2010 => "f2fs",
        0x6969 => "nfs",
        0x6573_5546 => "fuse",
        0x0102_1997 => "9p",
        _ => return format!("{magic:#x}"),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_something() {
        let m = MachineInfo::detect();
        assert!(m.cpus >= 1);
        assert!(!m.kernel.is_empty());
        assert_ne!(filesystem_of(Path::new("/")), "unknown");
        assert_eq!(filesystem_of(Path::new("/no/such/dir")), "unknown");
    }
}
