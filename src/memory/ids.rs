//! Ids and timestamps of notes. Writers hold `crate::files::FileLock` and replace files with
//! `crate::files::write_atomic_with`, so a reader never takes the lock: every file it can see
//! was renamed into place complete, old bytes or new, never half of a write.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `2026-11-30T09:55:01.123Z`: fixed width, so comparing the strings compares the times.
pub fn timestamp(millis: u64) -> String {
    let (date, secs_of_day) = civil(millis);
    format!(
        "{date}T{:02}:{:02}:{:02}.{:03}Z",
        secs_of_day / 3600,
        secs_of_day / 60 % 60,
        secs_of_day % 60,
        millis % 1000
    )
}

/// `n-20261130-095501-7f3a9c`: sorts by creation time; the random tail keeps two agents (or two
/// branches) storing in the same second apart.
pub fn new_id(prefix: &str, millis: u64) -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let (date, secs) = civil(millis);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(millis);
    hasher.write_u32(std::process::id());
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let compact_date: String = date.chars().filter(|c| *c != '-').collect();
    format!(
        "{prefix}-{compact_date}-{:02}{:02}{:02}-{:06x}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        hasher.finish() & 0xff_ffff
    )
}

/// A random number, for ids of derived files (not for anything secret).
pub fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(now_millis());
    hasher.write_u32(std::process::id());
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

/// Milliseconds since the Unix epoch of a timestamp written by [`timestamp`] (or any
/// `YYYY-MM-DDTHH:MM:SS[.mmm]...` text), `None` when it does not read as one.
pub fn parse_millis(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        b.get(r)?.iter().try_fold(0i64, |n, d| {
            d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0'))
        })
    };
    let day = days_from_civil(num(0..4)?, num(5..7)?, num(8..10)?)?;
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let (h, m, s) = if b.len() >= 19 && b[10] == b'T' {
        (num(11..13)?, num(14..16)?, num(17..19)?)
    } else {
        (0, 0, 0)
    };
    let ms = if b.len() >= 23 && b[19] == b'.' {
        num(20..23)?
    } else {
        0
    };
    Some(((day * 24 + h) * 60 + m) * 60_000 + s * 1000 + ms)
}

/// Days since the Unix epoch of a civil date, `None` for a month or day out of range.
pub fn days_from_civil(year: i64, month: i64, day: i64) -> Option<i64> {
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    // Howard Hinnant's days-from-civil, the inverse of `civil`.
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// (`YYYY-MM-DD`, seconds into that day) in UTC.
fn civil(millis: u64) -> (String, u64) {
    let secs = millis / 1000;
    let days = (secs / 86_400) as i64;
    // Howard Hinnant's days-to-civil, valid for every date this program will see.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (format!("{year:04}-{month:02}-{day:02}"), secs % 86_400)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_and_ids() {
        // 2026-11-30T09:55:01.123Z
        let millis = 1_796_032_501_123;
        assert_eq!(timestamp(millis), "2026-11-30T09:55:01.123Z");
        assert_eq!(timestamp(951_782_400_000), "2000-02-29T00:00:00.000Z");
        let id = new_id("n", millis);
        assert!(id.starts_with("n-20261130-095501-"), "{id}");
        assert_eq!(id.len(), "n-20261130-095501-7f3a9c".len());
        assert_ne!(new_id("n", millis), new_id("n", millis));
        assert_eq!(parse_millis(&timestamp(millis)), Some(millis as i64));
        assert_eq!(parse_millis("2000-02-29"), Some(951_782_400_000));
        assert_eq!(parse_millis("yesterday"), None);
    }
}
