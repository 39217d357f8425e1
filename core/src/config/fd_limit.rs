//! The process's open-file limit, which the default connection ceiling is derived from. Read
//! from `/proc/self/limits` (no unsafe call needed); where that file does not exist the limit is
//! unknown and the caller assumes a conservative one.

/// The soft `Max open files` limit, if this platform says (`None` for unlimited or unknown).
pub(super) fn open_file_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    soft_open_files(&limits)
}

/// The soft column of the `Max open files` row of a `/proc/<pid>/limits` text.
fn soft_open_files(limits: &str) -> Option<u64> {
    let row = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    row.trim_start_matches("Max open files")
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_soft_limit_and_nothing_else() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \n\
                    Max processes             63704                63704                processes \n\
                    Max open files            1024                 524288               files     \n";
        assert_eq!(soft_open_files(text), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(soft_open_files(unlimited), None);
        assert_eq!(soft_open_files(""), None);
    }

    #[test]
    fn the_default_ceiling_leaves_room_below_the_limit() {
        use super::super::derived_max_connections;
        assert_eq!(derived_max_connections(Some(1024)), 384);
        assert_eq!(derived_max_connections(Some(20_000)), 9872);
        assert_eq!(derived_max_connections(Some(256)), 64);
        assert_eq!(derived_max_connections(None), 384);
    }
}
