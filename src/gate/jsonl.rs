//! Incremental reading of append-only JSONL logs (Claude's transcript, Kimi's `wire.jsonl`, the
//! OpenCode ledger) from a saved byte offset, in flat memory whatever the file's size.
//!
//! Only complete lines are handed out: the agents write their logs asynchronously, so a last
//! line without its newline is left for the next check and the saved offset stays before it.
//! A file that shrank, whose first bytes changed, or that is another inode was truncated or
//! replaced: [`Cursor::resume`] says so and the caller starts over from byte 0.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Lines up to this size are handed out whole; longer ones only by position, so a caller can
/// stream-parse them without holding them in memory.
pub const MAX_LINE: usize = 1 << 20;
const CHUNK: usize = 128 << 10;
/// How much of the file's start identifies it across checks.
const HEAD: u64 = 4096;

/// Where the last check stopped in one file, and what that file looked like then.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub path: PathBuf,
    pub offset: u64,
    pub dev: u64,
    pub ino: u64,
    pub head_len: u64,
    pub head_hash: String,
}

/// How reading a file resumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Same file, grown or unchanged: continue at the saved offset.
    At(u64),
    /// Never read before: start at 0.
    New,
    /// Truncated or replaced since the last check: start over at 0.
    Restart,
}

impl Cursor {
    /// Compares the saved cursor with the file now open at `path`.
    pub fn resume(saved: Option<&Cursor>, path: &Path, file: &mut File) -> io::Result<Resume> {
        let Some(saved) = saved.filter(|saved| saved.path == path) else {
            return Ok(Resume::New);
        };
        let meta = file.metadata()?;
        let (dev, ino) = identity(&meta);
        if (dev, ino) != (saved.dev, saved.ino) || meta.len() < saved.offset {
            return Ok(Resume::Restart);
        }
        if head_hash(file, saved.head_len)? != saved.head_hash {
            return Ok(Resume::Restart);
        }
        Ok(Resume::At(saved.offset))
    }

    /// The cursor to save after reading `file` up to `offset`. `verified` is the saved cursor
    /// when [`Cursor::resume`] just confirmed it: its head hash is reused when it covers the
    /// same bytes, which spares re-reading and hashing them at every repeat check.
    pub fn after(
        path: &Path,
        file: &mut File,
        offset: u64,
        verified: Option<&Cursor>,
    ) -> io::Result<Cursor> {
        let meta = file.metadata()?;
        let (dev, ino) = identity(&meta);
        let head_len = offset.min(HEAD);
        let head_hash = match verified {
            Some(saved)
                if saved.path == path
                    && (saved.dev, saved.ino) == (dev, ino)
                    && saved.head_len == head_len =>
            {
                saved.head_hash.clone()
            }
            _ => head_hash(file, head_len)?,
        };
        Ok(Cursor {
            path: path.to_path_buf(),
            offset,
            dev,
            ino,
            head_len,
            head_hash,
        })
    }
}

#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn identity(_meta: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

fn head_hash(file: &mut File, len: u64) -> io::Result<String> {
    file.seek(SeekFrom::Start(0))?;
    let mut head = Vec::with_capacity(len as usize);
    file.by_ref().take(len).read_to_end(&mut head)?;
    if (head.len() as u64) < len {
        // Shorter than what was read before: a different file.
        return Ok(String::new());
    }
    let digest = Sha256::digest(&head);
    Ok(digest.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// One complete line, without its `\n` (and without a `\r` before it).
pub enum Line<'a> {
    Whole(&'a [u8]),
    /// Longer than [`MAX_LINE`]: only its place, so it can be streamed from the file.
    Long {
        start: u64,
        len: u64,
    },
}

/// The complete lines of `file` holding a needle, from an offset on, read in fixed-size chunks.
///
/// The needle is searched in each chunk first, and line ends only around its hits: most bytes
/// of a large log are in lines without it and are passed over in one scan.
pub struct Lines<'f> {
    source: Source<'f>,
    finder: memchr::memmem::Finder<'f>,
    chunk: Vec<u8>,
    /// Bytes of `chunk` not handed out yet: `chunk[at..filled]`.
    at: usize,
    filled: usize,
    /// File offset of `chunk[0]`.
    chunk_start: u64,
    /// Offset just after the last complete line passed.
    done: u64,
    carry: Vec<u8>,
    eof: bool,
}

impl<'f> Lines<'f> {
    pub fn new(file: &'f File, offset: u64, needle: &'f [u8]) -> io::Result<Lines<'f>> {
        Lines::with_chunk(file, offset, needle, CHUNK)
    }

    fn with_chunk(
        file: &'f File,
        offset: u64,
        needle: &'f [u8],
        chunk: usize,
    ) -> io::Result<Lines<'f>> {
        let mut handle = file;
        handle.seek(SeekFrom::Start(offset))?;
        Ok(Lines::from_source(
            Source::File(file),
            offset,
            needle,
            chunk,
        ))
    }

    fn from_source(source: Source<'f>, offset: u64, needle: &'f [u8], chunk: usize) -> Lines<'f> {
        Lines {
            source,
            finder: memchr::memmem::Finder::new(needle),
            chunk: vec![0; chunk],
            at: 0,
            filled: 0,
            chunk_start: offset,
            done: offset,
            carry: Vec::new(),
            eof: false,
        }
    }

    /// The offset after the last complete line passed: what to save.
    pub fn offset(&self) -> u64 {
        self.done
    }

    fn refill(&mut self) -> io::Result<()> {
        self.chunk_start += self.filled as u64;
        self.at = 0;
        self.filled = 0;
        self.filled = match &self.source {
            Source::File(file) => read_some(file, &mut self.chunk)?,
            Source::Ahead { full, empty } => match full.recv() {
                Ok(Ok((chunk, filled))) => {
                    let done = std::mem::replace(&mut self.chunk, chunk);
                    // The reader stops once the file ends; a chunk it no longer takes is dropped.
                    let _ = empty.send(done);
                    filled
                }
                Ok(Err(err)) => return Err(err),
                Err(_) => 0,
            },
        };
        self.eof = self.filled == 0;
        Ok(())
    }

    /// Keeps the start of a line that goes on in the next chunk. Past [`MAX_LINE`] only its
    /// place is kept, so memory stays flat.
    fn keep(&mut self, from: usize, long: &mut bool) {
        if !*long {
            self.carry.extend_from_slice(&self.chunk[from..self.filled]);
            if self.carry.len() > MAX_LINE {
                *long = true;
                self.carry = Vec::new();
            }
        }
        self.at = self.filled;
    }

    /// The next complete line holding the needle, or `None` at the end. A partial last line is
    /// never returned; a line too long to hold is returned by place, needle or not.
    pub fn next_match(&mut self) -> io::Result<Option<Line<'_>>> {
        self.carry.clear();
        // Whether `carry` (or, when long, just `start`) holds an unfinished line.
        let mut in_line = false;
        let mut long = false;
        let mut start = self.done;
        loop {
            if self.at == self.filled {
                if self.eof {
                    return Ok(None);
                }
                self.refill()?;
                continue;
            }
            let rest = &self.chunk[self.at..self.filled];
            if in_line {
                let Some(i) = memchr::memchr(b'\n', rest) else {
                    self.keep(self.at, &mut long);
                    continue;
                };
                let end = self.at + i;
                let from = self.at;
                self.at = end + 1;
                self.done = self.chunk_start + self.at as u64;
                let len = self.done - 1 - start;
                if long {
                    return Ok(Some(Line::Long { start, len }));
                }
                self.carry.extend_from_slice(&self.chunk[from..end]);
                if self.carry.len() > MAX_LINE {
                    return Ok(Some(Line::Long { start, len }));
                }
                // The needle may straddle the chunks: search the assembled line.
                if self.finder.find(&self.carry).is_some() {
                    return Ok(Some(Line::Whole(trim_cr(&self.carry))));
                }
                self.carry.clear();
                in_line = false;
                start = self.done;
                continue;
            }
            match self.finder.find(rest) {
                Some(hit) => {
                    let line_from = memchr::memrchr(b'\n', &rest[..hit]).map_or(0, |k| k + 1);
                    start = self.chunk_start + (self.at + line_from) as u64;
                    self.done = start;
                    match memchr::memchr(b'\n', &rest[hit..]) {
                        Some(j) => {
                            let from = self.at + line_from;
                            let end = self.at + hit + j;
                            self.at = end + 1;
                            self.done = self.chunk_start + self.at as u64;
                            return Ok(Some(Line::Whole(trim_cr(&self.chunk[from..end]))));
                        }
                        None => {
                            self.keep(self.at + line_from, &mut long);
                            in_line = true;
                        }
                    }
                }
                None => {
                    // No needle here; a needle cut by the chunk's end is found once the last,
                    // unfinished line is assembled.
                    let line_from = memchr::memrchr(b'\n', rest).map_or(0, |k| k + 1);
                    start = self.chunk_start + (self.at + line_from) as u64;
                    self.done = start;
                    self.keep(self.at + line_from, &mut long);
                    in_line = true;
                }
            }
        }
    }
}

/// Parses the complete lines of `file` from `offset` on as `T`, and returns the offset to save.
/// Lines without `needle` are skipped unparsed (the cheap path through large logs); lines that
/// are not valid JSON or not shaped like `T` are skipped, since the formats are internal to the
/// agents and change between versions.
///
/// A large unread region (a first check on a long session) is split over two threads: one
/// reads and filters lines, the other parses the few that match. Small regions (every repeat
/// check) stay on one thread, where starting a thread would cost more than it saves.
pub fn read_rows<T: DeserializeOwned>(
    file: &File,
    offset: u64,
    needle: &[u8],
    each: impl FnMut(T),
) -> io::Result<u64> {
    read_rows_with(
        file,
        offset,
        needle,
        |line| serde_json::from_slice(line).ok(),
        each,
    )
}

/// [`read_rows`] with the lines that fit in memory read by `parse` (a reader that takes only
/// what it needs from a row); lines too long to hold are still streamed through serde.
///
/// A large unread region (a first check on a long session) is read by two threads: one copies
/// the file out of the page cache (what `cat` costs), the other finds the needle and parses the
/// rows. Small regions (every repeat check) stay on one thread, where starting a thread would
/// cost more than it saves.
pub fn read_rows_with<T: DeserializeOwned>(
    file: &File,
    offset: u64,
    needle: &[u8],
    parse: impl FnMut(&[u8]) -> Option<T>,
    each: impl FnMut(T),
) -> io::Result<u64> {
    let unread = file.metadata()?.len().saturating_sub(offset);
    match unread >= PIPELINE_FROM {
        true => read_ahead(file, offset, |source| {
            parse_lines(
                file,
                Lines::from_source(source, offset, needle, AHEAD_CHUNK),
                parse,
                each,
            )
        }),
        false => parse_lines(file, Lines::new(file, offset, needle)?, parse, each),
    }
}

fn parse_lines<T: DeserializeOwned>(
    file: &File,
    mut lines: Lines,
    mut parse: impl FnMut(&[u8]) -> Option<T>,
    mut each: impl FnMut(T),
) -> io::Result<u64> {
    loop {
        let row = match lines.next_match()? {
            None => break,
            Some(Line::Whole(bytes)) => parse(bytes),
            Some(Line::Long { start, len }) => parse_long(file, start, len),
        };
        if let Some(row) = row {
            each(row);
        }
    }
    Ok(lines.offset())
}

/// Unread bytes from which [`read_rows`] uses two threads.
const PIPELINE_FROM: u64 = 8 << 20;
/// Chunks the reading thread may fill ahead of the parsing one.
const CHUNKS_AHEAD: usize = 4;
/// Chunks read ahead are larger: each costs the two threads a hand-over. Four of 256 KiB keep
/// a first check on 100 MB under 9 MiB of peak memory; four of 512 KiB took it past 10 MiB.
const AHEAD_CHUNK: usize = 256 << 10;

/// Where [`Lines`] gets its bytes.
enum Source<'f> {
    File(&'f File),
    /// A thread reading the file ahead: filled chunks come on `full`, and go back on `empty` to be
    /// filled again, so nothing is copied between the threads and memory stays bounded.
    Ahead {
        full: Receiver<io::Result<(Vec<u8>, usize)>>,
        empty: SyncSender<Vec<u8>>,
    },
}

/// Runs `read` with a [`Source`] that a second thread fills from `offset` on.
fn read_ahead<R>(
    file: &File,
    offset: u64,
    read: impl FnOnce(Source) -> io::Result<R>,
) -> io::Result<R> {
    let mut handle = file;
    handle.seek(SeekFrom::Start(offset))?;
    std::thread::scope(|scope| {
        let (full_sender, full) = sync_channel(CHUNKS_AHEAD + 1);
        let (empty, empty_receiver) = sync_channel::<Vec<u8>>(CHUNKS_AHEAD + 1);
        for _ in 0..CHUNKS_AHEAD {
            let _ = empty.send(vec![0; AHEAD_CHUNK]);
        }
        scope.spawn(move || {
            for mut chunk in empty_receiver {
                let filled = read_some(file, &mut chunk).map(|filled| (chunk, filled));
                let end = matches!(filled, Ok((_, 0)) | Err(_));
                // A closed channel means the parser is gone; nothing more to hand over.
                if full_sender.send(filled).is_err() || end {
                    break;
                }
            }
        });
        // `read` drops the source before the scope waits for the thread, which then ends.
        read(Source::Ahead { full, empty })
    })
}

/// One read into `chunk` from the file's position, retried when interrupted; 0 at its end.
fn read_some(mut file: &File, chunk: &mut [u8]) -> io::Result<usize> {
    loop {
        match file.read(chunk) {
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            read => return read,
        }
    }
}

/// Parses a line too long to hold, streaming it from the file.
fn parse_long<T: DeserializeOwned>(file: &File, start: u64, len: u64) -> Option<T> {
    let at = At {
        file,
        pos: start,
        end: start + len,
    };
    serde_json::from_reader(io::BufReader::with_capacity(64 << 10, at)).ok()
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// A window of a file read by position, leaving the shared file offset alone.
struct At<'f> {
    file: &'f File,
    pos: u64,
    end: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = (self.end - self.pos).min(buf.len() as u64) as usize;
        if want == 0 {
            return Ok(0);
        }
        let n = read_at(self.file, &mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    file.read_at(buf, pos)
}

#[cfg(windows)]
fn read_at(file: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    use std::os::windows::fs::FileExt;
    file.seek_read(buf, pos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn collect(file: &File, offset: u64) -> (Vec<String>, u64) {
        collect_matching(file, offset, b"", CHUNK)
    }

    /// An empty needle matches every line.
    fn collect_matching(
        file: &File,
        offset: u64,
        needle: &[u8],
        chunk: usize,
    ) -> (Vec<String>, u64) {
        let mut lines = Lines::with_chunk(file, offset, needle, chunk).unwrap();
        let mut out = Vec::new();
        loop {
            let text = match lines.next_match().unwrap() {
                None => break,
                Some(Line::Whole(bytes)) => String::from_utf8(bytes.to_vec()).unwrap(),
                Some(Line::Long { start, len }) => {
                    let mut text = String::new();
                    let mut at = At {
                        file,
                        pos: start,
                        end: start + len,
                    };
                    at.read_to_string(&mut text).unwrap();
                    format!("long:{}", text.len())
                }
            };
            out.push(text);
        }
        (out, lines.offset())
    }

    #[test]
    fn partial_last_line_is_left_for_later() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"a\r\nbb\nccc").unwrap();
        let (lines, offset) = collect(&file, 0);
        assert_eq!(lines, ["a", "bb"]);
        assert_eq!(offset, 6);
        file.write_all(b"c\n").unwrap();
        let (lines, offset) = collect(&file, offset);
        assert_eq!(lines, ["cccc"]);
        assert_eq!(offset, 11);
    }

    #[test]
    fn needle_filtering_matches_a_naive_split_at_every_chunk_size() {
        let lines = [
            "x NEEDLE y",
            "",
            "nothing here",
            "NEEDLE",
            "NEEDL",
            "E split? no",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaNEEDLE",
            "NEEDLEaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "two NEEDLE NEEDLE\r",
            "tail",
        ];
        let text = lines.join("\n") + "\npartial NEEDLE";
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        let expected: Vec<String> = lines
            .iter()
            .filter(|line| line.contains("NEEDLE"))
            .map(|line| line.trim_end_matches('\r').to_owned())
            .collect();
        let complete = (text.len() - "partial NEEDLE".len()) as u64;
        for chunk in 1..=70 {
            let (found, offset) = collect_matching(&file, 0, b"NEEDLE", chunk);
            assert_eq!(found, expected, "chunk {chunk}");
            assert_eq!(offset, complete, "chunk {chunk}");
        }
        // From the middle of the file, at a line start.
        let from = (lines[..4].join("\n").len() + 1) as u64;
        let (found, _) = collect_matching(&file, from, b"NEEDLE", 16);
        assert_eq!(found, expected[2..]);
    }

    #[test]
    fn lines_across_chunks_and_long_lines() {
        let mut file = tempfile::tempfile().unwrap();
        let mid = "x".repeat(CHUNK + 10);
        let long = "y".repeat(MAX_LINE + CHUNK * 2 + 3);
        write!(file, "{mid}\n{long}\nz\n").unwrap();
        let (lines, offset) = collect(&file, 0);
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], mid);
        assert_eq!(lines[1], format!("long:{}", long.len()));
        assert_eq!(lines[2], "z");
        assert_eq!(offset, file.metadata().unwrap().len());
    }

    #[test]
    fn one_and_two_threads_read_the_same_rows() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Row {
            n: u64,
        }
        let mut file = tempfile::tempfile().unwrap();
        let big = "z".repeat(MAX_LINE + 5);
        for n in 0..20_000u64 {
            match n % 7000 {
                7 => writeln!(file, "{{\"n\":{n},\"hit\":1,\"pad\":\"{big}\"}}").unwrap(),
                _ if n % 1000 == 13 => writeln!(file, "{{\"hit\":1, broken").unwrap(),
                _ if n % 3 == 0 => writeln!(file, "{{\"n\":{n},\"hit\":1}}").unwrap(),
                _ => writeln!(file, "{{\"n\":{n},\"miss\":\"{}\"}}", "y".repeat(600)).unwrap(),
            }
        }
        write!(file, "{{\"n\":99999,\"hit\":1").unwrap();
        let parse = |line: &[u8]| serde_json::from_slice::<Row>(line).ok();
        let mut one = Vec::new();
        let lines = Lines::new(&file, 0, b"hit").unwrap();
        let end_one = parse_lines(&file, lines, parse, |row| one.push(row.n)).unwrap();
        let mut two = Vec::new();
        let end_two = read_ahead(&file, 0, |source| {
            let lines = Lines::from_source(source, 0, b"hit", CHUNK);
            parse_lines(&file, lines, parse, |row| two.push(row.n))
        })
        .unwrap();
        assert_eq!(one, two);
        assert_eq!(end_one, end_two);
        assert!(one.contains(&7) && one.contains(&3) && !one.contains(&1));
        assert!(!one.contains(&99999));
        let len = file.metadata().unwrap().len();
        assert_eq!(end_one, len - "{\"n\":99999,\"hit\":1".len() as u64);
        // The public entry point picks the threaded path for a file this size.
        assert!(len >= PIPELINE_FROM);
        let mut all = Vec::new();
        read_rows(&file, 0, b"hit", |row: Row| all.push(row.n)).unwrap();
        assert_eq!(all, one);
    }

    #[test]
    fn a_verified_head_hash_is_reused_only_for_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, "x".repeat(5000) + "\n").unwrap();
        let mut file = File::open(&path).unwrap();
        let first = Cursor::after(&path, &mut file, 5001, None).unwrap();
        let mut forged = first.clone();
        forged.head_hash = "reused".into();
        let again = Cursor::after(&path, &mut file, 5001, Some(&forged)).unwrap();
        assert_eq!(again.head_hash, "reused");
        // A shorter head covers other bytes: hashed afresh.
        forged.head_len = 10;
        let fresh = Cursor::after(&path, &mut file, 5001, Some(&forged)).unwrap();
        assert_eq!(fresh.head_hash, first.head_hash);
    }

    #[test]
    fn cursor_detects_truncation_and_replacement() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, "one\ntwo\n").unwrap();
        let mut file = File::open(&path).unwrap();
        let cursor = Cursor::after(&path, &mut file, 8, None).unwrap();
        assert_eq!(Cursor::resume(None, &path, &mut file).unwrap(), Resume::New);
        assert_eq!(
            Cursor::resume(Some(&cursor), &path, &mut file).unwrap(),
            Resume::At(8)
        );

        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"three\n")
            .unwrap();
        let mut file = File::open(&path).unwrap();
        assert_eq!(
            Cursor::resume(Some(&cursor), &path, &mut file).unwrap(),
            Resume::At(8)
        );

        // Same inode, shorter: truncated.
        std::fs::write(&path, "one\n").unwrap();
        let mut file = File::open(&path).unwrap();
        assert_eq!(
            Cursor::resume(Some(&cursor), &path, &mut file).unwrap(),
            Resume::Restart
        );

        // Same inode, same length or longer, other first bytes: rewritten.
        std::fs::write(&path, "uno\ntwo\nthree\n").unwrap();
        let mut file = File::open(&path).unwrap();
        assert_eq!(
            Cursor::resume(Some(&cursor), &path, &mut file).unwrap(),
            Resume::Restart
        );

        // Another file renamed over it with the same bytes: another inode.
        let other = dir.path().join("new.jsonl");
        std::fs::write(&other, "one\ntwo\nthree\n").unwrap();
        let keep = File::open(&path).unwrap();
        std::fs::rename(&other, &path).unwrap();
        let mut file = File::open(&path).unwrap();
        assert_eq!(
            Cursor::resume(Some(&cursor), &path, &mut file).unwrap(),
            Resume::Restart
        );
        drop(keep);
    }
}
